#!/bin/sh
# Starts the process chosen by TARGET: one service (distributed shape) or the all-in-one stack.
set -eu
cd /app
target="${TARGET:-all}"
if [ "$target" != "stack" ] && [ -f "services/$target/src/main.ts" ]; then
  entry="services/$target/src/main.ts"
else
  entry="services/stack/src/main.ts"
  # The stack reads TARGET as its module list (all, or e.g. "tenancy,gateway").
  [ "$target" = "stack" ] && export TARGET=all
  # Several modules in one process each bind their own loopback port (README: leave GRPC_PORT and
  # HTTP_PORT unset then); the image's GRPC_PORT default is for a single service and would make every
  # module bind the same port (EADDRINUSE).
  unset GRPC_PORT HTTP_PORT
fi
exec node --enable-source-maps --import tsx --import ./libs/platform/src/telemetry-preload.ts "$entry" "$@"
