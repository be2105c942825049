#!/usr/bin/env bash
# Install everything the benchmark harness needs, in one command: the peers (bubblewrap,
# firejail, util-linux's unshare, Anthropic's sandbox runtime with its socat and ripgrep),
# hyperfine, gnuplot and GNU time from Debian, and srt from the npm registry at the version
# pinned in bench/package-lock.json (npm ci into bench/node_modules).
# corral's own build dependencies are not installed here: see the README's setup step.
set -euo pipefail
cd "$(dirname "$0")"

SUDO=
if [ "$(id -u)" -ne 0 ]; then SUDO=sudo; fi
export DEBIAN_FRONTEND=noninteractive

pkgs=(hyperfine bubblewrap firejail gnuplot-nox util-linux socat ripgrep time python3 procps)
# Node.js: the machine image may already carry a newer Node with its own npm; Debian's
# nodejs and npm packages are only the fallback.
command -v npm >/dev/null 2>&1 || pkgs+=(nodejs npm)

missing=()
for p in "${pkgs[@]}"; do
	dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q 'install ok installed' || missing+=("$p")
done
if [ "${#missing[@]}" -gt 0 ]; then
	echo "deps: installing ${missing[*]}"
	$SUDO apt-get update -qq
	$SUDO apt-get install -y -qq --no-install-recommends "${missing[@]}"
fi

# srt 0.0.78 is the newest release whose engines field accepts Node 20.
node -e 'const [a,b]=process.versions.node.split(".").map(Number);
  if (a < 20 || (a === 20 && b < 11)) console.error("deps: warning: Node " +
    process.versions.node + " is older than srt needs (>= 20.11); its row will be skipped")'

npm ci --no-audit --no-fund --loglevel=error
echo "deps: ok ($(node_modules/.bin/srt --version 2>/dev/null | head -1 || echo 'srt ?'))"
