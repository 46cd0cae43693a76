#!/bin/bash
# rxe_policy + verbs/rxm pingpong in init_net, netns_tcp + tcp pingpong.
set -euo pipefail
. /pd/lib/vm-net-setup.sh
rxe_policy
netns_tcp
ibv_devices
rdma link show
echo "== verbs msg rxe1 <- rxe0"
fi_pingpong -p verbs -e msg -d rxe1 -I 100 -S 4096 &
srv=$!
sleep 2
timeout 60 fi_pingpong -p verbs -e msg -d rxe0 -I 100 -S 4096 "$RXE1_ADDR"
wait "$srv"
echo "== verbs;ofi_rxm (FI_UNIVERSE_SIZE=$FI_UNIVERSE_SIZE)"
fi_pingpong -p "verbs;ofi_rxm" -e rdm -d rxe1 -I 100 -S 4096 &
srv=$!
sleep 2
timeout 60 fi_pingpong -p "verbs;ofi_rxm" -e rdm -d rxe0 -I 100 -S 4096 "$RXE1_ADDR"
wait "$srv"
echo "== tcp across netns"
ip netns exec ns2 fi_pingpong -p tcp -e msg -I 100 -S 4096 &
srv=$!
sleep 2
ip netns exec ns1 timeout 60 fi_pingpong -p tcp -e msg -I 100 -S 4096 "$NS2_ADDR"
wait "$srv"
rdma statistic show link rxe0/1 | tr ' ' '\n' | grep -A1 -E '^(sent_pkts|rcvd_pkts)$' | paste - - || true
