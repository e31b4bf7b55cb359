# Sourced by the scripts: `moebench_help_if_asked "$@"` prints the calling script's header comment
# (what it does, its options and environment) and exits 0 when the arguments hold -h or --help,
# before the script does any work.
moebench_help_if_asked() {
  local a
  for a in "$@"; do
    if [ "$a" = -h ] || [ "$a" = --help ]; then
      sed -n '2,/^[^#]/{/^#/s/^# \{0,1\}//p}' "$0"
      exit 0
    fi
  done
}
