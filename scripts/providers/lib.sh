# Sourced by the provider scripts in this folder (gnome-keyring, keepassxc, kwallet).
#
# Each provider script runs a command inside a private D-Bus session bus on which one Secret
# Service runs headless, with an unlocked default collection:
#
#   scripts/providers/NAME CMD [ARGS...]     start the provider, run CMD, tear down
#   scripts/providers/NAME --restart         (inside a session only) stop the provider, wait
#                                            until its writes are on disk, start it again
#
# The bus has no service directories, so nothing is D-Bus-activated: otherwise one provider
# (or xdg-desktop-portal) activates another and it takes org.freedesktop.secrets first
# (KeePassXC then writes FdoSecrets/Enabled=false to its ini).
#
# Exported to CMD:
#   TOKENSTORE_TEST_PROVIDER           gnome-keyring | keepassxc | kwallet
#   TOKENSTORE_TEST_PROVIDER_SCRIPT    this script (tests nest a session of the same provider)
#   TOKENSTORE_TEST_PROVIDER_DIR       the scratch folder (HOME and the XDG folders are in it)
#   TOKENSTORE_TEST_PROVIDER_RESTART   the command that restarts the provider in this session
#   TOKENSTORE_TEST_KEYRING_PASSWORD   the throwaway password of the default collection
# Never touches the user's bus or keyring; the scratch folder is removed at the end.

provider_usage() {
    echo "usage: $(basename "$0") CMD [ARGS...]   |   $(basename "$0") --restart (inside a session)" >&2
    exit 64
}

provider_require() {  # provider_require TOOL... : exit 69 naming the installer if one is missing
    local tool
    for tool in "$@"; do
        if ! command -v "$tool" >/dev/null 2>&1; then
            echo "$PROVIDER: $tool not found (run scripts/providers/install)" >&2
            exit 69
        fi
    done
}

# Makes the scratch folder and points HOME and the XDG folders into it.
provider_scratch() {
    root=$(mktemp -d "${TMPDIR:-/tmp}/tokenstore-$PROVIDER.XXXXXXXX")
    chmod 0700 "$root"
    mkdir -m 0700 "$root/home" "$root/runtime"
    mkdir -p "$root/home/.local/share" "$root/home/.config" "$root/home/.cache"
    unset DBUS_SESSION_BUS_ADDRESS SECRET_BACKEND DISPLAY WAYLAND_DISPLAY GNOME_KEYRING_CONTROL
    unset XDG_CURRENT_DESKTOP KDE_FULL_SESSION
    export HOME="$root/home" XDG_RUNTIME_DIR="$root/runtime"
    export XDG_DATA_HOME="$HOME/.local/share" XDG_CONFIG_HOME="$HOME/.config" XDG_CACHE_HOME="$HOME/.cache"
    export QT_QPA_PLATFORM=offscreen   # KeePassXC and kwalletd5 are Qt programs; no display
    export TOKENSTORE_TEST_PROVIDER="$PROVIDER" TOKENSTORE_TEST_PROVIDER_DIR="$root"
    TOKENSTORE_TEST_PROVIDER_SCRIPT=$(cd "$(dirname "$0")" && pwd)/$(basename "$0")
    export TOKENSTORE_TEST_PROVIDER_SCRIPT
    export TOKENSTORE_TEST_PROVIDER_RESTART="$TOKENSTORE_TEST_PROVIDER_SCRIPT --restart"
    cat >"$root/session.conf" <<CONF
<!DOCTYPE busconfig PUBLIC "-//freedesktop//DTD D-Bus Bus Configuration 1.0//EN"
 "http://www.freedesktop.org/standards/dbus/1.0/busconfig.dtd">
<busconfig>
  <type>session</type>
  <keep_umask/>
  <listen>unix:dir=$root/runtime</listen>
  <auth>EXTERNAL</auth>
  <!-- no service directories: nothing is D-Bus-activated -->
  <policy context="default">
    <allow send_destination="*" eavesdrop="true"/>
    <allow eavesdrop="true"/>
    <allow own="*"/>
  </policy>
</busconfig>
CONF
}

provider_cleanup() {
    if [ -n "${TOKENSTORE_PROVIDER_KEEP:-}" ]; then echo "$PROVIDER: kept $root" >&2; return; fi
    if [ -n "${root:-}" ] && [ -d "$root" ]; then
        rm -rf "$root" 2>/dev/null || { sleep 0.5; rm -rf "$root" 2>/dev/null || true; }
    fi
}

# The lock state of the default collection as the service says now: true, false, or none
# (no owner of org.freedesktop.secrets, or no default alias). Never activates anything.
provider_default_state() {
    local path out
    out=$(gdbus call --session --dest org.freedesktop.secrets --object-path /org/freedesktop/secrets \
        --timeout 5 --method org.freedesktop.Secret.Service.ReadAlias default 2>/dev/null) || { echo none; return; }
    path=$(printf '%s' "$out" | sed -n "s/^(objectpath '\\([^']*\\)',)\$/\\1/p")
    if [ -z "$path" ] || [ "$path" = / ]; then echo none; return; fi
    out=$(gdbus call --session --dest org.freedesktop.secrets --object-path "$path" --timeout 5 \
        --method org.freedesktop.DBus.Properties.Get org.freedesktop.Secret.Collection Locked 2>/dev/null) \
        || { echo none; return; }
    case "$out" in *true*) echo true ;; *false*) echo false ;; *) echo none ;; esac
}

# Waits (up to $1 seconds) until the default collection exists and is unlocked. Waiting for
# the name alone is not enough: KeePassXC owns it before it has opened the database, and a
# client that finds no default collection then calls CreateCollection, which opens a dialog.
provider_wait_unlocked() {
    local deadline=$((SECONDS + $1))
    until [ "$(provider_default_state)" = false ]; do
        if [ "$SECONDS" -ge "$deadline" ]; then
            echo "$PROVIDER: no unlocked default collection after $1 s (state: $(provider_default_state))" >&2
            return 70
        fi
        sleep 0.1
    done
}

# The pid of the owner of org.freedesktop.secrets, or nothing.
provider_owner_pid() {
    gdbus call --session --dest org.freedesktop.DBus --object-path /org/freedesktop/DBus --timeout 5 \
        --method org.freedesktop.DBus.GetConnectionUnixProcessID org.freedesktop.secrets 2>/dev/null \
        | sed -n 's/^(uint32 \([0-9]*\),)$/\1/p'
}

# Stops a pid: SIGTERM, then SIGKILL after $2 seconds (KeePassXC ignores SIGTERM while a
# prompt is pending). Also sends SIGCONT in case a test left it stopped.
provider_stop_pid() {
    local pid=$1 grace=${2:-5} tries=0
    [ -n "$pid" ] || return 0
    kill -CONT "$pid" 2>/dev/null || true
    kill -TERM "$pid" 2>/dev/null || return 0
    while kill -0 "$pid" 2>/dev/null; do
        tries=$((tries + 1))
        if [ "$tries" -gt $((grace * 10)) ]; then
            echo "$PROVIDER: pid $pid ignored SIGTERM for ${grace} s; SIGKILL" >&2
            kill -KILL "$pid" 2>/dev/null || true
            break
        fi
        sleep 0.1
    done
}

# Waits until the name org.freedesktop.secrets has no owner (up to $1 seconds).
provider_wait_name_gone() {
    local limit=$1 tries=0
    while [ -n "$(provider_owner_pid)" ]; do
        tries=$((tries + 1))
        [ "$tries" -gt $((limit * 10)) ] && return 1
        sleep 0.1
    done
}

# The main flow: scratch, bus, "$0 --inside CMD..." on it, cleanup. Exits with CMD's status.
provider_main() {
    [ "${#COMMAND[@]}" -gt 0 ] || provider_usage
    provider_require dbus-run-session gdbus "${PROVIDER_TOOLS[@]}"
    trap provider_cleanup EXIT
    trap 'exit 130' INT
    trap 'exit 143' TERM
    provider_scratch
    TOKENSTORE_TEST_KEYRING_PASSWORD=$(od -An -N24 -tx1 /dev/urandom | tr -d ' \n')
    export TOKENSTORE_TEST_KEYRING_PASSWORD
    provider_prepare   # the provider's fixture (files in $root), before the bus exists
    local status=0
    dbus-run-session --config-file="$root/session.conf" -- "$TOKENSTORE_TEST_PROVIDER_SCRIPT" --inside "${COMMAND[@]}" \
        || status=$?
    exit "$status"
}

# Inside the bus: start, wait, run CMD (not exec: the provider must be torn down after it).
provider_inside() {
    local status=0
    provider_start || { echo "$PROVIDER: the provider did not start" >&2; provider_stop; exit 70; }
    "$@" || status=$?
    provider_stop
    exit "$status"
}

provider_dispatch() {  # provider_dispatch "$@": the three entry points
    case "${1:-}" in
        --inside) shift; root=$TOKENSTORE_TEST_PROVIDER_DIR; provider_inside "$@" ;;
        --restart)
            [ -n "${TOKENSTORE_TEST_PROVIDER_DIR:-}" ] || { echo "$PROVIDER: --restart only inside a session" >&2; exit 64; }
            root=$TOKENSTORE_TEST_PROVIDER_DIR
            PROVIDER_PERSIST=1 provider_stop
            provider_start ;;
        "") provider_usage ;;
        *) COMMAND=("$@"); provider_main ;;
    esac
}
