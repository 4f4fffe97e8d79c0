# Load balancer for docker/compose.yaml: Debian's nginx with docker/nginx.conf, run as
# a non-root user on port 8080. Built from the same base as deepmt's image, so no
# registry is needed when BASE is the local localhost/debian:bookworm-slim.
ARG BASE=debian:bookworm-slim
FROM ${BASE}
RUN apt-get update \
 && DEBIAN_FRONTEND=noninteractive apt-get install -y --no-install-recommends nginx \
 && rm -rf /var/lib/apt/lists/* /var/cache/apt/* /var/log/apt /var/log/dpkg.log \
 && rm -f /etc/nginx/sites-enabled/* \
 && nginx -v
COPY nginx.conf /etc/nginx/nginx.conf
COPY nginx-entrypoint.sh /usr/local/bin/nginx-entrypoint.sh
# (no `nginx -t` here: the resolver is written when the container starts, from its
# /etc/resolv.conf)
USER www-data
EXPOSE 8080
STOPSIGNAL SIGQUIT
ENTRYPOINT ["/usr/local/bin/nginx-entrypoint.sh"]
