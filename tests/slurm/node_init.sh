#!/usr/bin/env bash
# The inside of one node of the test cluster, run by unshare in the node's own network, UTS and
# mount namespaces (tests/slurm/nodes.sh): its hostname; on a compute node a /tmp and /dev/shm of
# its own (tmpfs), with the cluster's shared home bound back at the same paths where they lie
# under /tmp; the cluster's /etc/hosts; loopback up. Then it holds the namespaces open (sleep)
# until the cluster stops it.
#   node_init.sh NAME DIR compute|login [SHARED_PATH...]
set -euo pipefail
name="$1" dir="$2" role="$3"
shift 3
hostname "$name"
if [ "$role" = compute ]; then
  # A tmpfs made aside (over /mnt, in this mount namespace only), the shared paths that lie under
  # /tmp bound into it while the machine's /tmp is still in view, then moved over /tmp: what the
  # node writes to /tmp no other node sees.
  stage=/mnt
  mount -t tmpfs -o size=4g,mode=1777 "tmp-$name" "$stage"
  for path in "$@"; do
    case "$path" in
      /tmp/*)
        mkdir -p "$stage/${path#/tmp/}"
        mount --rbind "$path" "$stage/${path#/tmp/}" ;;
    esac
  done
  mount --move "$stage" /tmp
  mount -t tmpfs -o size=4g,mode=1777 "shm-$name" /dev/shm
fi
mount --bind "$dir/hosts" /etc/hosts
ip link set lo up
echo $$ > "$dir/run/$name.ready"  # this pid holds on as the sleep
exec sleep infinity
