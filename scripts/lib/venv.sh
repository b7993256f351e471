# Sourced by the scripts: makes sure .venv exists and holds this checkout's pinned
# dependencies, reinstalling only when pyproject.toml changed. Sets REPO and VENV.
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
    wanted=$(sha256sum "$REPO/pyproject.toml" | cut -d' ' -f1)
    if [ "$(cat "$stamp" 2>/dev/null)" != "$wanted" ]; then
        echo "clusterforge: installing the project and its pinned dependencies into $VENV" >&2
        "$VENV/bin/pip" install --quiet --upgrade pip >/dev/null
        "$VENV/bin/pip" install --quiet -e "$REPO[dev]"
        echo "$wanted" >"$stamp"
    fi
}
