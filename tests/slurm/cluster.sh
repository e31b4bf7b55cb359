#!/usr/bin/env bash
# A one-node Slurm cluster for the tests, from Debian's munge, slurmctld, slurmd and slurm-client,
# as root: munged, then slurmctld and slurmd in the foreground of background jobs, all under DIR
# (its key, sockets, spool, state, logs and slurm.conf), on two free ports. Stopped by the pids it
# recorded, never by name, so another Slurm on the machine is left alone.
#   tests/slurm/cluster.sh start DIR    exit 0 once the node is idle (within 60 s); 77 (skip)
#                                       where Slurm is not installed or this is not root
#   tests/slurm/cluster.sh stop DIR     ends what start started
#   tests/slurm/cluster.sh env DIR      prints the export line the clients need (SLURM_CONF)
# The node has this machine's cores, or 4 where it has fewer (4 CPU ranks on 2 cores).
set -uo pipefail
action="${1:-}" dir="${2:-}"
die() { echo "slurm cluster: error: $*" >&2; exit 1; }
[ -n "$dir" ] || die "usage: $0 start|stop|env DIR"
pids=(munged slurmctld slurmd)

stop() {
  for p in slurmd slurmctld munged; do
    [ -f "$dir/$p.pid" ] || continue
    pid="$(cat "$dir/$p.pid")"
    kill "$pid" 2>/dev/null
    for _ in $(seq 1 30); do kill -0 "$pid" 2>/dev/null || break; sleep 0.1; done
    kill -9 "$pid" 2>/dev/null
    rm -f "$dir/$p.pid"
  done
}

case "$action" in
  env) echo "export SLURM_CONF=$dir/slurm.conf"; exit 0 ;;
  stop) stop; exit 0 ;;
  start) ;;
  *) die "unknown action '$action'; allowed: start, stop, env" ;;
esac

for b in munged slurmctld slurmd srun sbatch sinfo scontrol; do
  command -v "$b" >/dev/null 2>&1 || { echo "slurm cluster: skipped: $b is not installed (scripts/setup.sh installs Slurm)"; exit 77; }
done
[ "$(id -u)" = 0 ] || { echo "slurm cluster: skipped: slurmd runs jobs as root here, and this is not root"; exit 77; }

stop  # what an earlier run in DIR left
rm -rf "$dir" && mkdir -p "$dir"/{munge,spool,state,run} || die "cannot make $dir"
dir="$(cd "$dir" && pwd)"
chmod 755 "$dir" "$dir/munge"
head -c 1024 /dev/urandom > "$dir/munge.key" && chmod 600 "$dir/munge.key"
free_port() { python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])'; }
ctld_port="$(free_port)" slurmd_port="$(free_port)"
while [ "$slurmd_port" = "$ctld_port" ]; do slurmd_port="$(free_port)"; done
host="$(hostname -s)"
# At least 4 CPUs, whatever the machine has: the tests run 4 ranks a node (on 2 cores here), and
# config_overrides makes slurmd take the configured count rather than drain the node.
cpus=$(( $(nproc) > 4 ? $(nproc) : 4 ))
cat > "$dir/slurm.conf" <<EOF
ClusterName=moebench-test
SlurmctldHost=$host
SlurmUser=root
SlurmdUser=root
SlurmctldPort=$ctld_port
SlurmdPort=$slurmd_port
AuthType=auth/munge
AuthInfo=socket=$dir/munge/munge.socket
CredType=cred/munge
StateSaveLocation=$dir/state
SlurmdSpoolDir=$dir/spool
SlurmctldPidFile=$dir/run/slurmctld.pid
SlurmdPidFile=$dir/run/slurmd.pid
SlurmctldLogFile=$dir/slurmctld.log
SlurmdLogFile=$dir/slurmd.log
ProctrackType=proctrack/linuxproc
TaskPlugin=task/none
MpiDefault=none
SchedulerType=sched/builtin
SelectType=select/cons_tres
SelectTypeParameters=CR_Core
ReturnToService=2
SlurmdParameters=config_overrides
JobCompType=jobcomp/none
AccountingStorageType=accounting_storage/none
NodeName=$host CPUs=$cpus State=UNKNOWN
PartitionName=test Nodes=ALL Default=YES MaxTime=INFINITE State=UP OverSubscribe=YES
EOF
export SLURM_CONF="$dir/slurm.conf"

munged -F --force --socket="$dir/munge/munge.socket" --key-file="$dir/munge.key" --log-file="$dir/munged.log" \
  --pid-file="$dir/run/munged.pid" --seed-file="$dir/munged.seed" > "$dir/munged.out" 2>&1 &
echo $! > "$dir/munged.pid"
slurmctld -D -f "$SLURM_CONF" > "$dir/slurmctld.out" 2>&1 &
echo $! > "$dir/slurmctld.pid"
slurmd -D -f "$SLURM_CONF" > "$dir/slurmd.out" 2>&1 &
echo $! > "$dir/slurmd.pid"

for _ in $(seq 1 120); do
  if [ "$(sinfo -h -o %t 2>/dev/null)" = idle ]; then
    echo "slurm cluster: up in $dir (node $host, $cpus CPUs; ${pids[*]} by pid)"
    exit 0
  fi
  sleep 0.5
done
echo "slurm cluster: error: the node is not idle after 60 s; logs in $dir" >&2
tail -3 "$dir"/*.log "$dir"/*.out >&2 2>/dev/null
stop
exit 1
