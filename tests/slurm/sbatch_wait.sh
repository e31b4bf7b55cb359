#!/usr/bin/env bash
# sbatch ARGS..., then waits for the job to end and exits with its exit code, as `sbatch --wait`
# does but polling the controller every 0.2 s (sbatch --wait sleeps up to 10 s between polls:
# most of a short job's time in the tests).
set -uo pipefail
id="$(sbatch --parsable "$@")" || exit $?
id="${id%%;*}"
echo "Submitted batch job $id"
for _ in $(seq 1 6000); do
  info="$(scontrol -o show job "$id" 2>/dev/null)"
  state="$(sed -n 's/.* JobState=\([A-Z_]*\).*/\1/p' <<<"$info")"
  case "$state" in
    PENDING|CONFIGURING|RUNNING|COMPLETING|SUSPENDED|REQUEUED|RESIZING) sleep 0.2 ;;
    COMPLETED) exit 0 ;;
    *)
      code="$(sed -n 's/.* ExitCode=\([0-9]*\):.*/\1/p' <<<"$info")"
      echo "sbatch_wait: job $id ended ${state:-without a record} (exit code ${code:-unknown})" >&2
      [ -n "$code" ] && [ "$code" != 0 ] && exit "$code"
      exit 1 ;;
  esac
done
echo "sbatch_wait: job $id still running after 20 min" >&2
exit 1
