"""``python -m augloader …`` runs the daemon's command line (the
``augloader`` executable the wheel installed, found as find_binary finds
it): ``python -m augloader serve --shards …``. ``python -m augloader
shardconv …`` runs the converter's."""
import os
import sys

from .daemon import DaemonError, find_binary


def main(argv=None) -> int:
    args = list(sys.argv[1:] if argv is None else argv)
    name = "augloader"
    if args and args[0] == "shardconv":
        name, args = "shardconv", args[1:]
    try:
        exe = find_binary(name)
    except DaemonError as e:
        print(f"augloader: {e}", file=sys.stderr)
        return 127
    sys.stdout.flush()
    sys.stderr.flush()
    os.execv(exe, [exe] + args)
    return 0  # not reached


if __name__ == "__main__":
    sys.exit(main())
