#!/usr/bin/env bash
# Install everything the test suite needs on a fresh Debian-based machine:
# Debian packages (dig from dnsutils, the unbound resolver, chromium for the status page,
# openssl, the Knot and NSD secondaries, promtool from prometheus, pebble and lego for ACME)
# and the Python test extra.
set -euo pipefail
cd "$(dirname "$0")/.."

debs=()
command -v dig >/dev/null 2>&1 || debs+=(dnsutils)
command -v unbound >/dev/null 2>&1 || debs+=(unbound)
command -v chromium >/dev/null 2>&1 || debs+=(chromium)  # status page tests
command -v redis-server >/dev/null 2>&1 || debs+=(redis-server)  # multi-node health tests
command -v faketime >/dev/null 2>&1 || debs+=(faketime)  # a cluster node with a skewed clock
command -v openssl >/dev/null 2>&1 || debs+=(openssl)  # self-signed certificates for HTTPS probe tests
command -v knotd >/dev/null 2>&1 || debs+=(knot)  # a real secondary and the differential peer
command -v kdig >/dev/null 2>&1 || debs+=(knot-dnsutils)  # kdig: AXFR/IXFR with TSIG
command -v nsd >/dev/null 2>&1 || debs+=(nsd)  # a second real secondary
command -v delv >/dev/null 2>&1 || debs+=(bind9-dnsutils)  # delv: DNSSEC validation
command -v ldns-verify-zone >/dev/null 2>&1 || debs+=(ldnsutils)  # checks signed zones
command -v named-checkconf >/dev/null 2>&1 || debs+=(bind9 bind9-utils)  # dnsviz probe -N runs named
command -v dnsdist >/dev/null 2>&1 || debs+=(dnsdist)  # a real balancer sending PROXY v2
command -v haproxy >/dev/null 2>&1 || debs+=(haproxy)  # send-proxy-v2 in front of TCP
[ -e /usr/include/graphviz/cgraph.h ] || debs+=(graphviz libgraphviz-dev)  # pygraphviz (dnsviz grok)
command -v systemd-analyze >/dev/null 2>&1 || debs+=(systemd)  # verifies docs/dnsd.service
command -v dockerd >/dev/null 2>&1 || debs+=(docker.io)  # the compose test bed, run for real
command -v docker-compose >/dev/null 2>&1 || debs+=(docker-compose)
command -v debootstrap >/dev/null 2>&1 || debs+=(debootstrap)  # docker/offline-images.sh
command -v gcc >/dev/null 2>&1 || debs+=(gcc)  # builds the compiled serving loop (dnsd/_fastloop.c)
command -v fstrm_capture >/dev/null 2>&1 || debs+=(fstrm-bin)  # the dnstap socket reader
command -v dnstap-read >/dev/null 2>&1 || debs+=(bind9-dnsutils)  # reads dnstap files
command -v promtool >/dev/null 2>&1 || debs+=(prometheus)  # promtool checks docs/prometheus/ rules
command -v pebble >/dev/null 2>&1 || debs+=(pebble)  # an ACME server validating DNS-01 against dnsd
command -v lego >/dev/null 2>&1 || debs+=(lego)  # an ACME client publishing DNS-01 by UPDATE
if [ ${#debs[@]} -gt 0 ]; then
  sudo=""
  [ "$(id -u)" -eq 0 ] || sudo="sudo"
  echo "installing Debian packages: ${debs[*]}"
  $sudo apt-get update -qq
  # Install without starting services (unbound would otherwise try port 53).
  printf '#!/bin/sh\nexit 101\n' | $sudo tee /usr/sbin/policy-rc.d >/dev/null
  $sudo chmod +x /usr/sbin/policy-rc.d
  DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -qq --no-install-recommends "${debs[@]}" >/dev/null
  $sudo rm -f /usr/sbin/policy-rc.d
fi

# The lock (tests/constraints.txt) unless DNSD_TEST_LATEST=1 (make test-latest): the newest
# releases, to see whether a new upstream release breaks anything before the lock moves.
if [ "${DNSD_TEST_LATEST:-0}" = 1 ]; then
  python3 -m pip install -q --disable-pip-version-check --root-user-action=ignore --upgrade \
    --upgrade-strategy eager -e '.[test]'
else
  python3 -m pip install -q --disable-pip-version-check --root-user-action=ignore \
    -c tests/constraints.txt -e '.[test]'
fi
