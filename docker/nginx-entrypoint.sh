#!/bin/sh
# Starts nginx with the container's own DNS server as its resolver, so that it
# re-resolves the replicas' name (docker/nginx.conf): open-source nginx needs the
# resolver's address written out, and it differs between Docker (127.0.0.11) and
# podman (the network's gateway, aardvark-dns). The first nameserver is the
# container network's; the rest, when any, are the host's and do not know the
# replicas.
set -eu
ns=$(awk '$1 == "nameserver" { a = $2; if (a ~ /:/) a = "[" a "]"; print a; exit }' /etc/resolv.conf)
echo "resolver ${ns:-127.0.0.11} valid=1s ipv6=off;" > /tmp/nginx-resolver.conf
exec nginx -e stderr -g 'daemon off;'
