# Sourced by the scripts: makes sure .venv exists and holds this checkout's pinned
# dependencies: the toolkit with its dev extra, and the two services (projects of their
# own under services/) with what their tests need. Reinstalls only when one of the three
# pyproject.toml files changed. Sets REPO and VENV.
REPO=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
VENV="$REPO/.venv"

ensure_venv() {
    local python stamp wanted
    python=$(command -v python3.11 || command -v python3)
    if ! "$python" -c 'import sys; sys.exit(sys.version_info[:2] != (3, 11))'; then
        echo "clusterforge: Python 3.11 is required; $python is $("$python" --version)" >&2
        return 1
    fi
    if [ ! -x "$VENV/bin/python" ]; then
        echo "clusterforge: creating the virtualenv $VENV" >&2
        "$python" -m venv "$VENV" || {
            echo "clusterforge: python3 -m venv failed; install Debian's python3-venv" >&2
            return 1
        }
    fi
    stamp="$VENV/.clusterforge-installed"
    wanted=$(cat "$REPO/pyproject.toml" "$REPO/services/userdir/pyproject.toml" \
        "$REPO/services/orders/pyproject.toml" | sha256sum | cut -d' ' -f1)
    if [ "$(cat "$stamp" 2>/dev/null)" != "$wanted" ]; then
        echo "clusterforge: installing the project and its pinned dependencies into $VENV" >&2
        "$VENV/bin/pip" install --quiet --upgrade pip >/dev/null
        # --no-compile: pip would byte-compile every file it installs, most of them in
        # the ansible package's 93 collections, which no run imports (54 s against 11 s
        # for that package alone here). Python compiles what a run imports, once.
        "$VENV/bin/pip" install --quiet --no-compile -e "$REPO[dev]"
        # A second pip run: upgrading a toolkit that still carried the services' console
        # scripts removes those scripts, so the services must be installed after it.
        "$VENV/bin/pip" install --quiet --no-compile -e "$REPO/services/userdir[server,test]" \
            -e "$REPO/services/orders[test]"
        echo "$wanted" >"$stamp"
    fi
}
