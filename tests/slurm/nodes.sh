# The nodes of a test cluster of several on one machine, sourced by tests/slurm/cluster.sh. Each
# node is a holder process in network, UTS and mount namespaces of its own (node_init.sh): a
# login node (mb-login: slurmctld and the clients) and compute nodes mb-node1..N (a slurmd each,
# each with its own /tmp and /dev/shm). A switch namespace holds a bridge; each node reaches it
# over a veth pair made inside the namespaces, so no address exists outside them. A compute
# node's side of its link is shaped with tbf to the cluster's rate; inside a node the ranks use
# shared memory. Expects $dir (absolute) and $here.
subnet=10.231.0

node_names() {  # the compute nodes' names, from $dir/nodes
  cat "$dir/nodes" 2>/dev/null
}

node_address() {  # NAME -> its address on the bridge
  case "$1" in
    mb-login) echo "$subnet.1" ;;
    mb-node*) echo "$subnet.$(( 10 + ${1#mb-node} ))" ;;
  esac
}

holder_pid() { cat "$dir/run/$1.holder" 2>/dev/null; }

# Whether PID still runs what a pid file recorded (its command line begins with WHAT): a run
# killed before its stop leaves pid files behind, and their pids may since be another's.
pid_runs() {
  local cmd
  [ -n "$1" ] && cmd="$(tr '\0' ' ' 2>/dev/null < "/proc/$1/cmdline")" && [[ "$cmd" == "$2"* ]]
}

# The pids of every process in NAME's network namespace (the holder's), by the namespace's inode;
# never this shell's own namespace (a stale record must not name the machine's).
node_pids() {
  local ns p
  ns="$(cat "$dir/run/$1.netns" 2>/dev/null)" || return 0
  [ -n "$ns" ] && [ "$ns" != "$(readlink /proc/self/ns/net)" ] || return 0
  for p in /proc/[0-9]*; do
    [ "$(readlink "$p/ns/net" 2>/dev/null)" = "$ns" ] && echo "${p#/proc/}"
  done
}

# Runs a command in NAME's namespaces.
in_node() {
  local name="$1"; shift
  nsenter -t "$(holder_pid "$name")" --net --uts --mount "$@"
}

# start_holder NAME compute|login|switch SHARED...: the node's namespaces, ready for use.
start_holder() {
  local name="$1" role="$2" pid
  shift 2
  rm -f "$dir/run/$name.ready"
  if [ "$role" = switch ]; then
    unshare --net --kill-child --fork sleep infinity > "$dir/$name.out" 2>&1 &
    pid=$!
    echo "$pid" > "$dir/run/$name.ready"
  else
    unshare --net --uts --mount --propagation slave --kill-child --fork \
      bash "$here/node_init.sh" "$name" "$dir" "$role" "$@" > "$dir/$name.out" 2>&1 &
    pid=$!
  fi
  echo "$pid" > "$dir/run/$name.holder"
  for _ in $(seq 1 100); do
    [ -f "$dir/run/$name.ready" ] && break
    kill -0 "$pid" 2>/dev/null || { echo "slurm cluster: error: node $name did not start: $(cat "$dir/$name.out")" >&2; return 1; }
    sleep 0.05
  done
  [ -f "$dir/run/$name.ready" ] || { echo "slurm cluster: error: node $name not ready after 5 s" >&2; return 1; }
  readlink "/proc/$pid/ns/net" > "$dir/run/$name.netns"
}

# The rate as tc takes it: RATE GB/s -> bytes per second ("bps" is bytes in tc's units).
tc_rate() { python3 -c 'import sys; print(f"{round(float(sys.argv[1]) * 1e9)}bps")' "$1"; }

# link_up NAME: the node's veth pair to the switch, its address, and on a compute node tbf.
link_up() {
  local name="$1" port="p-${1#mb-}" addr
  addr="$(node_address "$name")"
  ip link add eth0 netns "$(holder_pid "$name")" type veth peer name "$port" netns "$(holder_pid mb-switch)" || return 1
  nsenter -t "$(holder_pid mb-switch)" --net ip link set "$port" master br0 up || return 1
  nsenter -t "$(holder_pid "$name")" --net sh -c "ip addr add $addr/24 dev eth0 && ip link set eth0 up" || return 1
  if [ "$name" != mb-login ] && [ -n "$(cat "$dir/link" 2>/dev/null)" ]; then shape "$name" add || return 1; fi
}

# shape NAME add|change: tbf on the node's side of its link, at the rate in $dir/link.
shape() {
  local rate burst gbps
  gbps="$(cat "$dir/link")"
  rate="$(tc_rate "$gbps")"
  # A burst of 1 ms at the rate, at least two frames: a link serializes every byte at its rate,
  # and a bucket that fills while the ranks compute would let the next exchange's first bytes
  # through at memory speed (a 64 KiB burst did: a forward's first all-to-all took 1% of it, the
  # second, a millisecond later on an empty bucket, 46%). tbf splits larger (GSO) packets. A
  # queue of 200 ms.
  burst="$(python3 -c 'import sys; print(max(3028, round(float(sys.argv[1]) * 1e6)))' "$gbps")"
  nsenter -t "$(holder_pid "$1")" --net tc qdisc "$2" dev eth0 root tbf rate "$rate" burst "$burst" latency 200ms
}

# start_nodes N SHARED...: the switch, the login node and N compute nodes, linked; /etc/hosts.
start_nodes() {
  local n="$1" i name
  shift
  : > "$dir/nodes"
  for i in $(seq 1 "$n"); do echo "mb-node$i" >> "$dir/nodes"; done
  {
    echo "127.0.0.1 localhost"
    echo "$(node_address mb-login) mb-login"
    for name in $(node_names); do echo "$(node_address "$name") $name"; done
  } > "$dir/hosts"
  start_holder mb-switch switch || return 1
  nsenter -t "$(holder_pid mb-switch)" --net sh -c 'ip link add br0 type bridge && ip link set br0 up && ip link set lo up' ||
    return 1
  start_holder mb-login login "$@" || return 1
  link_up mb-login || return 1
  for name in $(node_names); do
    start_holder "$name" compute "$@" || return 1
    link_up "$name" || return 1
  done
}

# Every process of every node, then the holders: the namespaces (and their links) go with them.
stop_nodes() {
  local name pid
  for name in $(node_names) mb-login mb-switch; do
    for pid in $(node_pids "$name"); do kill -9 "$pid" 2>/dev/null; done
    pid="$(holder_pid "$name")"
    pid_runs "$pid" unshare && kill -9 "$pid" 2>/dev/null
    rm -f "$dir/run/$name.holder" "$dir/run/$name.netns" "$dir/run/$name.ready"
  done
}

# A node's death: every process in its namespaces, its slurmd included, killed at once.
kill_node() {
  local name="$1" pid pids
  pids="$(node_pids "$name")"
  local keep=" $(holder_pid "$name") $(cat "$dir/run/$name.ready" 2>/dev/null) "
  for pid in $pids; do [[ "$keep" == *" $pid "* ]] || kill -9 "$pid" 2>/dev/null; done
  return 0
}

set_link() {  # set_link NAME down|up: the node's side of its link
  nsenter -t "$(holder_pid "$1")" --net ip link set eth0 "$2"
}
