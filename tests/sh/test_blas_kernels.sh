#!/bin/sh
# test_blas_kernels.sh — `deepmt --version` names the OpenBLAS kernels in use
# (model/blas_kernels.h), and OPENBLAS_CORETYPE changes them. TAP.
# DEEPMT_BIN picks the binary (default build/deepmt).
set -u
cd "$(dirname "$0")/../.."
BIN=${DEEPMT_BIN:-build/deepmt}
. tests/sh/tap.sh
skip_unless_built "$BIN"

kernels() { "$@" "$BIN" --version | sed -n 's/^deepmt [^ ]* (OpenBLAS \(.*\) kernels)$/\1/p'; }

forced=$(kernels env OPENBLAS_CORETYPE=Haswell)
[ "$forced" = Haswell ]; ok $? "OPENBLAS_CORETYPE=Haswell: --version says Haswell kernels" "got '$forced'"
forced=$(kernels env OPENBLAS_CORETYPE=Sandybridge)
[ "$forced" = Sandybridge ]; ok $? "OPENBLAS_CORETYPE=Sandybridge: --version says Sandybridge kernels" "got '$forced'"
native=$(kernels env -u OPENBLAS_CORETYPE)
[ -n "$native" ] && [ "$native" != unknown ]; ok $? "unset: OpenBLAS's own choice is named ($native)" "got '$native'"
tap_done
