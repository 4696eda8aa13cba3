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
fi
exec node --enable-source-maps --import tsx --import ./libs/platform/src/telemetry-preload.ts "$entry" "$@"
