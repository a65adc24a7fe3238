#!/usr/bin/env bash
# Prepare a fresh CI machine (Debian bookworm, root, no registry) for the Docker backend
# tests: install the engine, debootstrap and gVisor from Debian's packages, register runsc,
# start dockerd in the background and build the worker test image. Idempotent: a second run
# on a prepared machine only checks (a few seconds).
#
#   scripts/ci_docker_setup.sh            # then: pytest -m docker
#
# Environment: SHX_DOCKERD_LOG (default /var/log/sandboxharness-dockerd.log); everything
# containers/build.sh reads (SANDBOXHARNESS_DOCKER_IMAGE, SHX_BUILD_CACHE, SHX_DEBIAN_MIRROR).
set -euo pipefail

REPO=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
DOCKERD_LOG=${SHX_DOCKERD_LOG:-/var/log/sandboxharness-dockerd.log}
DAEMON_JSON=/etc/docker/daemon.json
T0=$SECONDS
step() { printf '[ci_docker_setup %4ds] %s\n' $((SECONDS - T0)) "$*"; }
die() { printf 'ci_docker_setup: %s\n' "$*" >&2; exit 1; }

[ "$(id -u)" = 0 ] || die "must run as root (installs packages, starts dockerd)"

# -- 1. packages ------------------------------------------------------------------------
need=()
[ -x /usr/sbin/dockerd ] || need+=(docker.io)
command -v debootstrap >/dev/null || need+=(debootstrap)
[ -x /usr/bin/runsc ] || need+=(runsc)
if ((${#need[@]})); then
    step "installing ${need[*]}"
    export DEBIAN_FRONTEND=noninteractive
    # no init system here: keep the package scripts from trying to start services
    added_policy=0
    if [ ! -e /usr/sbin/policy-rc.d ]; then
        printf '#!/bin/sh\nexit 101\n' >/usr/sbin/policy-rc.d
        chmod 755 /usr/sbin/policy-rc.d
        added_policy=1
    fi
    apt-get update -qq
    apt-get install -y -qq --no-install-recommends "${need[@]}" >/dev/null
    [ "$added_policy" = 1 ] && rm -f /usr/sbin/policy-rc.d
else
    step "packages present"
fi

# -- 2. runtimes --------------------------------------------------------------------------
# gVisor refuses to start with a network in the root netns: --network=none. --oci-seccomp
# (where this runsc build has it) applies the container's seccomp profile inside the sandbox
# too; without it runsc ignores the profile (DockerSandbox then warns and does not claim it).
runsc_args='"--network=none"'
if runsc flags 2>&1 | grep -c -- '-oci-seccomp' >/dev/null; then
    runsc_args="$runsc_args, \"--oci-seccomp\""
fi
want=$(printf '{\n  "runtimes": {\n    "runsc": {"path": "/usr/bin/runsc", "runtimeArgs": [%s]}\n  }\n}\n' \
       "$runsc_args")
mkdir -p /etc/docker
reload=0
if [ ! -f "$DAEMON_JSON" ] || [ "$(cat "$DAEMON_JSON")" != "$want" ]; then
    [ -f "$DAEMON_JSON" ] && cp "$DAEMON_JSON" "$DAEMON_JSON.bak.$(date +%s)"
    printf '%s\n' "$want" >"$DAEMON_JSON"
    reload=1
    step "wrote $DAEMON_JSON"
fi

# -- 3. the engine ------------------------------------------------------------------------
engine_up() { timeout 10 docker info >/dev/null 2>&1; }
if engine_up; then
    if [ "$reload" = 1 ]; then
        pid=$(cat /var/run/docker.pid 2>/dev/null || true)
        [ -n "$pid" ] || die "dockerd runs but /var/run/docker.pid is missing: restart it by hand"
        kill -HUP "$pid"
        step "reloaded dockerd ($pid)"
        sleep 1
    else
        step "dockerd already running"
    fi
else
    step "starting dockerd (log: $DOCKERD_LOG)"
    setsid /usr/sbin/dockerd >"$DOCKERD_LOG" 2>&1 </dev/null &
    for _ in $(seq 1 120); do
        engine_up && break
        sleep 0.5
    done
    engine_up || { tail -n 30 "$DOCKERD_LOG" >&2; die "dockerd did not come up in 60 s"; }
    step "dockerd is up"
fi
docker info --format '{{json .Runtimes}}' | grep -q '"runsc"' \
    || die "runsc is not registered with dockerd (see $DAEMON_JSON)"

# -- 4. the worker image --------------------------------------------------------------------
"$REPO/containers/build.sh"
step "done in $((SECONDS - T0)) s"
