#!/usr/bin/env bash
# test.sh is the project's one test command, the same locally and in CI.
#
#   ./test.sh                      every package
#   ./test.sh -run TestLease       extra arguments go to go test
#   ./test.sh -v ./dag/...         arguments naming packages replace ./...
#
# It makes sure PostgreSQL and Redis answer (starting them, or installing
# them on Debian/Ubuntu as root, when needed) and that bubblewrap, which
# the sandbox tests run, chromium, which the web UI's browser tests run,
# and busybox-static, which the image tests' images are made of, are
# installed (likewise), then runs gofmt, go vet and go test -race. Tests
# that need a service or one of those tools skip when it is missing,
# except in CI (CI=true), where a missing one fails the run.
#
# Environment:
#   CIKIT_TEST_DATABASE_URL  PostgreSQL to test against; when set, test.sh
#                            only checks that it answers.
#                            Default postgres://postgres:postgres@127.0.0.1:5432/postgres
#   CIKIT_TEST_REDIS_URL     Redis to test against, likewise.
#                            Default redis://127.0.0.1:6379/0
#   CI                       "true" or "1": missing services are errors.
set -euo pipefail
# Written for bash 3.2 too (macOS): no mapfile, and empty arrays expand as
# ${a[@]+"${a[@]}"}, which set -u accepts there.

cd "$(dirname "${BASH_SOURCE[0]}")"

step="setup"
trap 'rc=$?; if ((rc != 0)); then echo "test.sh: FAIL ($step, exit $rc)" >&2; fi' EXIT

say() { echo "test.sh: $*" >&2; }
die() {
	say "$*"
	exit 1
}
in_ci() { [[ ${CI:-} == true || ${CI:-} == 1 ]]; }
have() { command -v "$1" >/dev/null 2>&1; }

# --- Go ---------------------------------------------------------------------

if ! have go && [[ -x /usr/local/go/bin/go ]]; then
	PATH="/usr/local/go/bin:$PATH"
fi
have go || die "go not found on PATH or in /usr/local/go/bin; install Go (see go.mod for the version) from https://go.dev/dl/"

# --- Services ---------------------------------------------------------------

step="services"

# as_root runs a command as root: directly, with passwordless sudo, or, if
# neither is possible, as this user (enough when the user owns the cluster).
as_root() {
	if ((EUID == 0)); then
		"$@"
	elif have sudo && sudo -n true 2>/dev/null; then
		sudo -n "$@"
	else
		"$@"
	fi
}
can_root() { ((EUID == 0)) || { have sudo && sudo -n true 2>/dev/null; }; }
is_debian() { [[ -f /etc/debian_version ]] && have apt-get; }

apt_updated=false
apt_install() {
	say "installing $* with apt-get"
	if ! $apt_updated; then
		as_root apt-get update -qq >/dev/null || return 1
		apt_updated=true
	fi
	as_root env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "$@" >/dev/null
}

# tcp_open HOST PORT: something accepts connections there.
tcp_open() {
	local t=()
	if have timeout; then t=(timeout 3); fi
	${t[@]+"${t[@]}"} bash -c 'exec 3<>"/dev/tcp/$0/$1"' "$1" "$2" 2>/dev/null
}

# url_host_port URL DEFAULT_PORT prints "host port" of a service URL.
url_host_port() {
	local re='^[a-z]+://([^@/]*@)?(\[[^]]*\]|[^:/?]*)(:([0-9]+))?'
	[[ $1 =~ $re ]] || return 1
	local host=${BASH_REMATCH[2]:-127.0.0.1} port=${BASH_REMATCH[4]:-$2}
	host=${host#[}
	host=${host%]}
	echo "$host $port"
}

# redact hides the password in a URL.
redact() { sed -E 's#^([a-z]+://[^:/@]*):[^@/]*@#\1:***@#' <<<"$1"; }

pg_answers() {
	local url=${CIKIT_TEST_DATABASE_URL:-}
	if have pg_isready; then
		if [[ -n $url ]]; then
			pg_isready -q -t 3 -d "$url"
		else
			pg_isready -q -t 3 -h 127.0.0.1 -p 5432
		fi
		return
	fi
	local hp=(127.0.0.1 5432)
	if [[ -n $url ]]; then
		read -ra hp < <(url_host_port "$url" 5432) || return 1
	fi
	tcp_open "${hp[@]}"
}

redis_answers() {
	local url=${CIKIT_TEST_REDIS_URL:-}
	if have redis-cli; then
		local t=()
		if have timeout; then t=(timeout 5); fi
		if [[ -n $url ]]; then
			[[ $(${t[@]+"${t[@]}"} redis-cli --no-auth-warning -u "$url" ping 2>/dev/null) == PONG ]]
		else
			[[ $(${t[@]+"${t[@]}"} redis-cli -h 127.0.0.1 -p 6379 ping 2>/dev/null) == PONG ]]
		fi
		return
	fi
	local hp=(127.0.0.1 6379)
	if [[ -n $url ]]; then
		read -ra hp < <(url_host_port "$url" 6379) || return 1
	fi
	tcp_open "${hp[@]}"
}

# wait_for NAME CHECK gives CHECK up to 30 s to succeed.
wait_for() {
	local i
	for ((i = 0; i < 30; i++)); do
		if "$2"; then return 0; fi
		sleep 1
	done
	say "$1 did not answer within 30 s"
	return 1
}

# start_postgres starts the clusters on port 5432, creating one with the
# newest installed version if there is none; then pg_created=true.
pg_created=false
start_postgres() {
	local ver name port status found=false
	while read -r ver name port status _; do
		[[ $port == 5432 ]] || continue
		found=true
		if [[ $status != online* ]]; then
			as_root pg_ctlcluster --skip-systemctl-redirect "$ver" "$name" start || return 1
		fi
	done < <(pg_lsclusters -h 2>/dev/null)
	$found && return 0
	ver=$(find /usr/lib/postgresql -mindepth 1 -maxdepth 1 -printf '%f\n' 2>/dev/null | sort -V | tail -n 1)
	[[ -n $ver ]] || return 1
	say "creating PostgreSQL cluster $ver/main"
	as_root pg_createcluster "$ver" main >/dev/null || return 1
	pg_created=true
	as_root pg_ctlcluster --skip-systemctl-redirect "$ver" main start
}

# set_pg_password makes the default URL work where the server asks for a
# password, as a new Debian cluster does for connections over TCP.
set_pg_password() {
	local sql="ALTER USER postgres PASSWORD 'postgres'"
	if ((EUID == 0)); then
		su postgres -c "cd / && psql -q -c \"$sql\""
	else
		sudo -n -u postgres sh -c "cd / && psql -q -c \"$sql\""
	fi
}

# The ensure functions leave a service answering, or add it to missing:
# the services the tests will not find.
missing=()

ensure_postgres() {
	if [[ -n ${CIKIT_TEST_DATABASE_URL:-} ]]; then
		pg_answers && return
		say "CIKIT_TEST_DATABASE_URL is set, but no PostgreSQL answers at $(redact "$CIKIT_TEST_DATABASE_URL")"
		missing+=(PostgreSQL)
		return
	fi
	pg_answers && return
	local installed=false
	if ! have pg_ctlcluster && is_debian && can_root; then
		apt_install postgresql || die "apt-get install postgresql failed"
		installed=true
	fi
	if ! have pg_ctlcluster; then
		say "PostgreSQL does not answer on 127.0.0.1:5432 and is not installed"
		missing+=(PostgreSQL)
		return
	fi
	say "starting PostgreSQL"
	if ! start_postgres || ! wait_for PostgreSQL pg_answers; then
		say "could not start PostgreSQL"
		missing+=(PostgreSQL)
		return
	fi
	if $installed || $pg_created; then
		set_pg_password || die "could not set the password of the postgres user"
	fi
}

ensure_redis() {
	if [[ -n ${CIKIT_TEST_REDIS_URL:-} ]]; then
		redis_answers && return
		say "CIKIT_TEST_REDIS_URL is set, but no Redis answers at $(redact "$CIKIT_TEST_REDIS_URL")"
		missing+=(Redis)
		return
	fi
	redis_answers && return
	if ! have redis-server && is_debian && can_root; then
		apt_install redis-server || die "apt-get install redis-server failed"
		# The package may have started it already.
		redis_answers && return
	fi
	if ! have redis-server; then
		say "Redis does not answer on 127.0.0.1:6379 and is not installed"
		missing+=(Redis)
		return
	fi
	say "starting Redis"
	if ! start_redis || ! wait_for Redis redis_answers; then
		say "could not start Redis"
		missing+=(Redis)
	fi
}

start_redis() {
	redis-server --daemonize yes --bind 127.0.0.1 --port 6379 --save "" --appendonly no >/dev/null
}

# bubblewrap (bwrap) runs the jobs of fleet/process's sandbox tests; it
# needs Linux with unprivileged user namespaces, which the tests check.
ensure_bubblewrap() {
	have bwrap && return
	if is_debian && can_root; then
		apt_install bubblewrap || die "apt-get install bubblewrap failed"
	fi
	if ! have bwrap; then
		say "bubblewrap (bwrap) is not installed"
		missing+=(bubblewrap)
	fi
}

# chromium runs the browser tests of the web UI (reference/web), headless.
# A failed install is not fatal: Ubuntu's chromium package only installs a
# snap, which containers often cannot run; the tests then report chromium
# missing (a skip, or in CI a failure).
ensure_chromium() {
	have chromium && return
	have chromium-browser && return
	if is_debian && can_root; then
		apt_install chromium || say "apt-get install chromium failed"
	fi
	if ! have chromium && ! have chromium-browser; then
		say "chromium is not installed"
		missing+=(chromium)
	fi
}

# Debian's static busybox (/bin/busybox) is what the test images of the
# image tests are made of (internal/imagetest).
ensure_busybox() {
	[[ -x /bin/busybox ]] && /bin/busybox --list 2>/dev/null | grep -qx sh && return
	if is_debian && can_root; then
		apt_install busybox-static || die "apt-get install busybox-static failed"
	fi
	if ! [[ -x /bin/busybox ]]; then
		say "busybox-static (/bin/busybox) is not installed"
		missing+=(busybox-static)
	fi
}

# xxd is one of the tools the secrets end-to-end test encodes a secret
# with, as a job would.
ensure_xxd() {
	have xxd && return
	if is_debian && can_root; then
		apt_install xxd || die "apt-get install xxd failed"
	fi
	if ! have xxd; then
		say "xxd is not installed"
		missing+=(xxd)
	fi
}

ensure_postgres
ensure_redis
ensure_bubblewrap
ensure_chromium
ensure_busybox
ensure_xxd

# "PostgreSQL, Redis and bubblewrap" rather than "PostgreSQL Redis bubblewrap".
lacking=""
for ((i = 0; i < ${#missing[@]}; i++)); do
	if ((i == 0)); then
		:
	elif ((i == ${#missing[@]} - 1)); then
		lacking+=" and "
	else
		lacking+=", "
	fi
	lacking+=${missing[i]}
done

services=""
for m in ${missing[@]+"${missing[@]}"}; do
	[[ $m == bubblewrap || $m == chromium || $m == busybox-static || $m == xxd ]] || services+="${services:+ and }$m"
done
if [[ -n $services ]]; then
	cat >&2 <<-EOF
	test.sh: the tests need PostgreSQL and Redis; not available: $services. Either
	  - install PostgreSQL >= 14 and Redis >= 6 and run them on 127.0.0.1:5432 and
	    127.0.0.1:6379, with user postgres, password postgres (or trust authentication);
	    on Debian/Ubuntu, running ./test.sh as root or with passwordless sudo does this;
	    on macOS: brew install postgresql@17 redis && brew services start postgresql@17 &&
	    brew services start redis (then: createuser -s postgres);
	  - or set CIKIT_TEST_DATABASE_URL (postgres://user:password@host:port/db) and
	    CIKIT_TEST_REDIS_URL (redis://host:port/db) to running instances.
	EOF
fi
if [[ $lacking == *bubblewrap* ]]; then
	cat >&2 <<-EOF
	test.sh: the sandbox tests need bubblewrap, which is not installed. Install it
	  (Debian/Ubuntu: apt-get install bubblewrap, which ./test.sh does as root or with
	  passwordless sudo); it needs Linux with unprivileged user namespaces.
	EOF
fi
if [[ $lacking == *chromium* ]]; then
	cat >&2 <<-EOF
	test.sh: the web UI's browser tests need chromium, which is not installed. Install
	  it (Debian: apt-get install chromium, which ./test.sh does as root or with
	  passwordless sudo; elsewhere any Chromium on PATH as chromium or chromium-browser).
	EOF
fi
if [[ $lacking == *busybox-static* ]]; then
	cat >&2 <<-EOF
	test.sh: the image tests build their images from Debian's static busybox, which is
	  not installed (Debian/Ubuntu: apt-get install busybox-static, which ./test.sh does
	  as root or with passwordless sudo).
	EOF
fi
if [[ -n $lacking ]]; then
	in_ci && die "CI=${CI}: refusing to run without $lacking"
	say "WARNING: tests that need $lacking will be skipped"
fi

# --- Checks -----------------------------------------------------------------

step="gofmt"
# The files git tracks: in CI's fresh clone, what was committed.
if git rev-parse --is-inside-work-tree >/dev/null 2>&1; then
	list_go() { git ls-files -z -- '*.go'; }
else
	list_go() { find . -name '*.go' -not -path '*/.*' -print0; }
fi
files=()
while IFS= read -r -d '' f; do
	[[ $f == testdata/* || $f == */testdata/* || ! -f $f ]] || files+=("$f")
done < <(list_go)
unformatted=""
# gofmt with no files would read stdin.
if ((${#files[@]} > 0)); then
	unformatted=$(gofmt -l "${files[@]}")
fi
if [[ -n $unformatted ]]; then
	say "not gofmt-ed (run gofmt -w on them):"
	sed 's/^/  /' <<<"$unformatted" >&2
	exit 1
fi

step="go vet"
go vet ./...

step="go test"
# Arguments naming packages replace ./...; the rest are go test flags.
pkgs=(./...)
for arg in "$@"; do
	if [[ $arg == ./* || $arg == ../* || $arg == */... || $arg == github.com/cikit/cikit* ]]; then
		pkgs=()
		break
	fi
done
go test -race -count=1 "$@" ${pkgs[@]+"${pkgs[@]}"}

step="done"
if [[ -n $lacking ]]; then
	say "PASS (gofmt, go vet, go test -race), but tests needing $lacking were skipped"
else
	say "PASS (gofmt, go vet, go test -race)"
fi
