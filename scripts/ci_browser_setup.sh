#!/usr/bin/env bash
# Prepare a CI machine (Debian bookworm, root) for the report's browser test: install Debian's
# chromium (headless) and the fonts it draws text with. Idempotent: on a prepared machine it
# only checks that the browser starts (a second or two).
#
#   scripts/ci_browser_setup.sh     # then: SANDBOXHARNESS_REQUIRE_BROWSER=1 pytest tests/integration/test_report_browser.py
set -euo pipefail

T0=$SECONDS
step() { printf '[ci_browser_setup %4ds] %s\n' $((SECONDS - T0)) "$*"; }
die() { printf 'ci_browser_setup: %s\n' "$*" >&2; exit 1; }

find_browser() { command -v chromium || command -v chromium-browser || true; }

if [ -z "$(find_browser)" ]; then
    [ "$(id -u)" = 0 ] || die "chromium is missing and installing it needs root"
    step "installing chromium"
    export DEBIAN_FRONTEND=noninteractive
    added_policy=0  # no init system here: keep package scripts from starting services
    if [ ! -e /usr/sbin/policy-rc.d ]; then
        printf '#!/bin/sh\nexit 101\n' >/usr/sbin/policy-rc.d
        chmod 755 /usr/sbin/policy-rc.d
        added_policy=1
    fi
    apt-get update -qq
    apt-get install -y -qq --no-install-recommends chromium fonts-dejavu-core >/dev/null
    [ "$added_policy" = 1 ] && rm -f /usr/sbin/policy-rc.d
fi
browser=$(find_browser)
[ -n "$browser" ] || die "chromium still not found after installing it"
version=$(timeout 60 "$browser" --headless --no-sandbox --version 2>/dev/null) \
    || die "$browser does not start"
step "ready: $browser ($version)"
