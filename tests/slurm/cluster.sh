#!/usr/bin/env bash
# A Slurm cluster for the tests, from Debian's munge, slurmctld, slurmd and slurm-client, as root:
# munged, then slurmctld and the slurmds in the foreground of background jobs, all under DIR (its
# key, sockets, state, logs and slurm.conf), on free ports. Stopped by the pids it recorded, never
# by name, so another Slurm on the machine is left alone.
#   cluster.sh start DIR [--nodes N] [--link GBPS] [--home PATH]...
#       exit 0 once every node is idle (within 60 s); 77 (skip) where Slurm is not installed, this
#       is not root, or the kernel refuses namespaces. One node (the default): this machine, with
#       this machine's cores or 4 where it has fewer (4 CPU ranks on 2 cores). N >= 2: N compute
#       nodes mb-node1..N and a login node mb-login, each in namespaces of its own on this machine
#       (tests/slurm/nodes.sh): its own hostname, /tmp and /dev/shm; DIR and each --home PATH (the
#       cluster's shared home) at the same path on every node; between the nodes TCP over a bridge,
#       shaped to GBPS GB/s when --link is given; 2 CPUs a node (as many ranks as the tests run on
#       one). slurmctld and the clients run on mb-login.
#   cluster.sh stop DIR                    ends what start started (and the nodes' namespaces)
#   cluster.sh env DIR                     the export line the clients need (SLURM_CONF)
#   cluster.sh exec DIR [--on NODE] CMD... CMD as a client runs it: on mb-login (or NODE) where
#                                          there are nodes, with SLURM_CONF, MOEBENCH_NODE_LINK (what
#                                          the rows' link says), OMPI_MCA_mpi_yield_when_idle=1 and
#                                          OPENBLAS_NUM_THREADS=1
#   cluster.sh kill-node DIR NODE          every process of NODE killed at once, its slurmd included
#   cluster.sh revive DIR NODE             NODE's slurmd started again (after kill-node)
#   cluster.sh link DIR NODE down|up       NODE's link to the others taken down or up
#   cluster.sh rate DIR GBPS               every compute node's link shaped to GBPS GB/s from now on
set -uo pipefail
action="${1:-}" dir="${2:-}"
here="$(cd "$(dirname "$0")" && pwd)"
die() { echo "slurm cluster: error: $*" >&2; exit 1; }
skip() { echo "slurm cluster: skipped: $*"; exit 77; }
[ -n "$dir" ] || die "usage: $0 start|stop|env|exec|kill-node|revive|link DIR ..."
shift 2
[ ! -d "$dir" ] || dir="$(cd "$dir" && pwd)"
source "$here/nodes.sh"

stop_pid() {  # the process whose pid DIR/NAME.pid holds, ended, if it still runs NAME
  local pid
  [ -f "$dir/$1.pid" ] || return 0
  pid="$(cat "$dir/$1.pid")"
  pid_runs "$pid" "$1" || { rm -f "$dir/$1.pid"; return 0; }
  kill "$pid" 2>/dev/null
  for _ in $(seq 1 30); do kill -0 "$pid" 2>/dev/null || break; sleep 0.1; done
  kill -9 "$pid" 2>/dev/null
  rm -f "$dir/$1.pid"
}
stop() {
  local name
  # The nodes' daemons go with their namespaces (every process in them, at once).
  stop_nodes
  for name in $(node_names); do rm -f "$dir/slurmd-$name.pid"; done
  [ -s "$dir/nodes" ] && rm -f "$dir/slurmctld.pid"
  stop_pid slurmd
  stop_pid slurmctld
  stop_pid munged
}
# The link between the nodes, as the rows' provenance says it.
node_link() {
  local rate
  rate="$(cat "$dir/link" 2>/dev/null)"
  echo "shared memory within a node; TCP $([ -n "$rate" ] && echo "shaped to $rate GB/s" || echo unshaped) between nodes"
}
start_slurmd() {  # start_slurmd NAME: its slurmd, in the node's namespaces
  in_node "$1" slurmd -D -f "$dir/slurm.conf" -N "$1" > "$dir/slurmd-$1.out" 2>&1 &
  echo $! > "$dir/slurmd-$1.pid"
}
node_arg() {
  grep -qx "$1" "$dir/nodes" 2>/dev/null || die "'$1' is not a node of this cluster; allowed: $(node_names | tr '\n' ' ')"
}

case "$action" in
  env) echo "export SLURM_CONF=$dir/slurm.conf"; exit 0 ;;
  stop) stop; exit 0 ;;
  exec)
    on=mb-login
    if [ "${1:-}" = --on ]; then on="${2:-}"; shift 2; [ "$on" = mb-login ] || node_arg "$on"; fi
    [ -f "$dir/slurm.conf" ] || die "no cluster in $dir"
    export SLURM_CONF="$dir/slurm.conf"
    [ -s "$dir/nodes" ] || exec "$@"
    export MOEBENCH_NODE_LINK="$(node_link)"
    # The nodes share this machine's cores, which Slurm cannot see: the ranks yield when they wait,
    # as mpirun makes them on more ranks than cores (else a spinning rank holds a core for its slice),
    # and a GEMM takes one thread, as under mpirun (a node's 2 CPUs are Slurm's view, not its own).
    export OMPI_MCA_mpi_yield_when_idle=1 OPENBLAS_NUM_THREADS=1
    exec nsenter -t "$(holder_pid "$on")" --net --uts --mount --wd="$PWD" "$@" ;;
  kill-node) node_arg "${1:-}"; kill_node "$1"; rm -f "$dir/slurmd-$1.pid"; exit 0 ;;
  revive)
    node_arg "${1:-}"
    start_slurmd "$1"
    SLURM_CONF="$dir/slurm.conf" in_node mb-login scontrol update NodeName="$1" State=RESUME >/dev/null 2>&1
    exit 0 ;;
  link)
    node_arg "${1:-}"
    case "${2:-}" in up|down) set_link "$1" "$2"; exit $? ;; *) die "link: '${2:-}'; allowed: up, down" ;; esac ;;
  rate)
    [ -s "$dir/nodes" ] || die "rate: no nodes in $dir"
    python3 -c 'import sys; sys.exit(0 if float(sys.argv[1]) > 0 else 1)' "${1:-}" 2>/dev/null ||
      die "rate: '${1:-}'; allowed: a rate in GB/s above 0"
    echo "$1" > "$dir/link"
    for name in $(node_names); do shape "$name" change || die "rate: tc refused $1 GB/s on $name"; done
    exit 0 ;;
  start) ;;
  *) die "unknown action '$action'; allowed: start, stop, env, exec, kill-node, revive, link, rate" ;;
esac

nodes=1 link="" homes=()
while [ $# -gt 0 ]; do
  case "$1" in
    --nodes) nodes="${2:-}"; shift 2 ;;
    --link) link="${2:-}"; shift 2 ;;
    --home) homes+=("$(cd "${2:-/nonexistent}" 2>/dev/null && pwd)") || die "--home: no folder '${2:-}'"; shift 2 ;;
    *) die "unknown option '$1'; allowed: --nodes N, --link GBPS, --home PATH" ;;
  esac
done
[[ "$nodes" =~ ^[1-9][0-9]?$ ]] || die "--nodes: '$nodes'; allowed: a whole number from 1 to 99"
[ -z "$link" ] || python3 -c 'import sys; sys.exit(0 if float(sys.argv[1]) > 0 else 1)' "$link" 2>/dev/null ||
  die "--link: '$link'; allowed: a rate in GB/s above 0, e.g. 0.05"
[ -z "$link" ] || [ "$nodes" -ge 2 ] || die "--link: a link joins nodes; give --nodes 2 or more"
for b in munged slurmctld slurmd srun sbatch sinfo scontrol; do
  command -v "$b" >/dev/null 2>&1 || skip "$b is not installed (scripts/setup.sh installs Slurm)"
done
[ "$(id -u)" = 0 ] || skip "slurmd runs jobs as root here, and this is not root"
if [ "$nodes" -ge 2 ]; then
  for b in unshare nsenter ip tc; do command -v "$b" >/dev/null 2>&1 || skip "$b is not installed (util-linux, iproute2)"; done
  why="$(unshare --net --uts --mount true 2>&1)" || skip "the kernel refuses namespaces: $why"
fi

[ -d "$dir" ] && stop  # what an earlier run in DIR left
rm -rf "$dir" && mkdir -p "$dir"/{munge,spool,state,run} || die "cannot make $dir"
dir="$(cd "$dir" && pwd)"
chmod 755 "$dir" "$dir/munge"
head -c 1024 /dev/urandom > "$dir/munge.key" && chmod 600 "$dir/munge.key"
free_port() { python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])'; }
ctld_port="$(free_port)" slurmd_port="$(free_port)"
while [ "$slurmd_port" = "$ctld_port" ]; do slurmd_port="$(free_port)"; done
if [ "$nodes" = 1 ]; then
  host="$(hostname -s)"
  # At least 4 CPUs, whatever the machine has: the tests run 4 ranks a node (on 2 cores here), and
  # config_overrides makes slurmd take the configured count rather than drain the node.
  cpus=$(( $(nproc) > 4 ? $(nproc) : 4 ))
  ctld_host="$host"
  node_lines="NodeName=$host CPUs=$cpus State=UNKNOWN"
  spool="$dir/spool" slurmd_pid="$dir/run/slurmd.pid"
else
  echo "$link" > "$dir/link"
  start_nodes "$nodes" "$dir" ${homes[@]+"${homes[@]}"} || { stop; die "the nodes did not start (logs in $dir)"; }
  cpus=2
  ctld_host="mb-login($(node_address mb-login))"
  node_lines="NodeName=mb-node[1-$nodes] NodeAddr=$subnet.[11-$((10 + nodes))] CPUs=$cpus State=UNKNOWN"
  # Node-local, as on a cluster: each node's /tmp is its own.
  spool=/tmp/moebench-slurmd slurmd_pid=/tmp/moebench-slurmd/slurmd.pid
fi
# A node whose slurmd stops answering is declared down after SlurmdTimeout: short here, so that a
# job with a task on a dead node ends within seconds, not Slurm's default 300.
cat > "$dir/slurm.conf" <<EOF
ClusterName=moebench-test
SlurmctldHost=$ctld_host
SlurmUser=root
SlurmdUser=root
SlurmctldPort=$ctld_port
SlurmdPort=$slurmd_port
AuthType=auth/munge
AuthInfo=socket=$dir/munge/munge.socket
CredType=cred/munge
StateSaveLocation=$dir/state
SlurmdSpoolDir=$spool
SlurmctldPidFile=$dir/run/slurmctld.pid
SlurmdPidFile=$slurmd_pid
SlurmctldLogFile=$dir/slurmctld.log
SlurmdLogFile=$dir/slurmd-%n.log
ProctrackType=proctrack/linuxproc
TaskPlugin=task/none
MpiDefault=none
SchedulerType=sched/builtin
SelectType=select/cons_tres
SelectTypeParameters=CR_Core
ReturnToService=2
SlurmdParameters=config_overrides
SlurmdTimeout=10
MessageTimeout=5
KillWait=5
JobCompType=jobcomp/none
AccountingStorageType=accounting_storage/none
$node_lines
PartitionName=test Nodes=ALL Default=YES MaxTime=INFINITE State=UP OverSubscribe=YES
EOF
# Slurm's PMIx plugin ends a fence that collects no data (the one that ends Open MPI's MPI_Init)
# with its tree collective, and on fewer nodes than TreeWidth (50) that tree has no edges: each
# node ends the fence alone, a rank's first message can reach a peer still in MPI_Init, and the
# peer crashes. The ring collective waits for every node (scripts/cluster_check.sh checks it).
echo "PMIxCollFence=ring" > "$dir/mpi.conf"
export SLURM_CONF="$dir/slurm.conf"

munged -F --force --socket="$dir/munge/munge.socket" --key-file="$dir/munge.key" --log-file="$dir/munged.log" \
  --pid-file="$dir/run/munged.pid" --seed-file="$dir/munged.seed" > "$dir/munged.out" 2>&1 &
echo $! > "$dir/munged.pid"
if [ "$nodes" = 1 ]; then
  slurmctld -D -f "$SLURM_CONF" > "$dir/slurmctld.out" 2>&1 &
  echo $! > "$dir/slurmctld.pid"
  slurmd -D -f "$SLURM_CONF" > "$dir/slurmd.out" 2>&1 &
  echo $! > "$dir/slurmd.pid"
  where="node $host, $cpus CPUs"
else
  in_node mb-login slurmctld -D -f "$SLURM_CONF" > "$dir/slurmctld.out" 2>&1 &
  echo $! > "$dir/slurmctld.pid"
  for name in $(node_names); do start_slurmd "$name"; done
  where="$nodes nodes mb-node1..$nodes of $cpus CPUs and mb-login; $(node_link)"
fi
sinfo_here() { if [ "$nodes" = 1 ]; then sinfo "$@"; else in_node mb-login sinfo "$@"; fi; }
for _ in $(seq 1 120); do
  if [ "$(sinfo_here -h -o %t 2>/dev/null | sort -u)" = idle ] &&
     [ "$(sinfo_here -h -N -o %N 2>/dev/null | sort -u | wc -l)" = "$nodes" ]; then
    echo "slurm cluster: up in $dir ($where; munged, slurmctld, slurmd by pid)"
    exit 0
  fi
  sleep 0.5
done
echo "slurm cluster: error: the nodes are not idle after 60 s; logs in $dir" >&2
tail -3 "$dir"/*.log "$dir"/*.out >&2 2>/dev/null
stop
exit 1
