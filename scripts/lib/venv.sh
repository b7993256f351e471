# shellcheck shell=bash
# Sourced by the scripts: makes sure .venv exists and holds this checkout's pinned
# dependencies: the toolkit with its dev extra, the two services (projects of their own
# under services/) with what their tests need, and the kit both depend on (services/kit).
# Reinstalls only when one of the four pyproject.toml files or this file (how it
# installs) changed. Sets REPO and VENV.
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
    # This file is part of the key: a venv made by an older install step (one without
    # the byte-compiling below, say) is made again rather than kept as it was.
    wanted=$(cat "$REPO/pyproject.toml" "$REPO/services/userdir/pyproject.toml" \
        "$REPO/services/orders/pyproject.toml" "$REPO/services/kit/pyproject.toml" \
        "${BASH_SOURCE[0]}" | sha256sum | cut -d' ' -f1)
    if [ "$(cat "$stamp" 2>/dev/null)" != "$wanted" ]; then
        echo "clusterforge: installing the project and its pinned dependencies into $VENV" >&2
        "$VENV/bin/pip" install --quiet --upgrade pip >/dev/null
        # --no-compile: pip would byte-compile every file it installs, most of them in
        # the ansible package's 93 collections, which no run imports (54 s against 11 s
        # for that package alone here). What runs do import is compiled below instead.
        "$VENV/bin/pip" install --quiet --no-compile -e "${REPO}[dev]"
        # A second pip run: upgrading a toolkit that still carried the services' console
        # scripts removes those scripts, so the services must be installed after it.
        # The kit in the same run: the services pin clusterforge-service-kit, which no
        # package index serves; pip takes this editable copy for it.
        "$VENV/bin/pip" install --quiet --no-compile -e "$REPO/services/kit[server]" \
            -e "$REPO/services/userdir[server,test]" -e "$REPO/services/orders[test]"
        # Compiled once here, because Python cannot be trusted to do it on first import:
        # where PYTHONDONTWRITEBYTECODE is set (it is on the machines CI runs on), every
        # ansible-playbook compiled ansible-core from source again, 1.3 s of a 2.2 s
        # --syntax-check. The collections of the ansible package are left out but for the
        # three this project uses.
        local site collections
        site=$("$VENV/bin/python" -c 'import sysconfig; print(sysconfig.get_paths()["purelib"])')
        collections="$site/ansible_collections"
        "$VENV/bin/python" -m compileall -q -j 0 -x '/ansible_collections/' "$site" >/dev/null
        "$VENV/bin/python" -m compileall -q -j 0 "$collections/ansible/posix" \
            "$collections/community/docker" "$collections/community/postgresql" >/dev/null
        echo "$wanted" >"$stamp"
    fi
}
