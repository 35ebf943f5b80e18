#!/bin/sh
# nvidia-smi for the machines e2e/providers/sshd-machine.sh makes with
# SSHD_MACHINE_GPUS set. It answers the two queries the agent asks from the
# machine's gpu/ directory, which tests write to:
#   gpus   one "NAME, MIB" line per GPU
#   pids   PIDs holding a GPU, one a line; only those still running are listed
#   hang   present: never answers
#   fail   present: fails as nvidia-smi does when it cannot reach the driver
d=$(cd "$(dirname "$0")/../gpu" && pwd) || exit 9
[ -e "$d/hang" ] && exec sleep 3600
if [ -e "$d/fail" ]; then
  echo "NVIDIA-SMI has failed because it couldn't communicate with the NVIDIA driver. Make sure that the latest NVIDIA driver is installed and running."
  exit 9
fi
case "$*" in
  "--query-gpu=name,memory.total --format=csv,noheader,nounits")
    cat "$d/gpus"
    ;;
  "--query-compute-apps=pid --format=csv,noheader")
    [ -f "$d/pids" ] || exit 0
    while read -r pid; do
      case "$pid" in '' | *[!0-9]*) continue ;; esac
      [ -d "/proc/$pid" ] && echo "$pid"
    done < "$d/pids"
    ;;
  *)
    echo "stand-in nvidia-smi: unsupported arguments: $*" >&2
    exit 2
    ;;
esac
exit 0
