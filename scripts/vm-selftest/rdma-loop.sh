#!/bin/bash
# rxe_loop (one rxe0, no policy routing needed) + verbs pingpong through
# rxe's internal loopback, and netns_tcp + tcp pingpong: the simplest rxe
# smoke test, needing no policy routing.
set -euo pipefail
. /pd/lib/vm-net-setup.sh
rxe_loop
netns_tcp
ibv_devices
echo "== verbs msg on rxe0 (loopback)"
fi_pingpong -p verbs -e msg -d rxe0 -I 100 -S 4096 &
srv=$!
sleep 2
timeout 60 fi_pingpong -p verbs -e msg -d rxe0 -I 100 -S 4096 "$RXE0_ADDR"
wait "$srv"
echo "== tcp across netns"
ip netns exec ns2 fi_pingpong -p tcp -e msg -I 100 -S 4096 &
srv=$!
sleep 2
ip netns exec ns1 timeout 60 fi_pingpong -p tcp -e msg -I 100 -S 4096 "$NS2_ADDR"
wait "$srv"
