"""The `coil` console command of the wheel: runs the coil executable installed in the package
(coil/bin/coil), with the same arguments, exit code and signals (exec, no child process)."""
import os
import sys


def executable() -> str:
    """The path of the coil executable inside the installed package."""
    return os.path.join(os.path.dirname(os.path.abspath(__file__)), "bin", "coil")


def main() -> None:
    exe = executable()
    if not os.access(exe, os.X_OK):
        sys.stderr.write(f"error: {exe} is missing: this coil package was not installed from a "
                         "wheel (pip install <coil checkout>); in a build tree run build/bin/coil\n")
        sys.exit(2)
    os.execv(exe, [exe] + sys.argv[1:])


if __name__ == "__main__":
    main()
