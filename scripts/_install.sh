# Sourced by scripts/serve, scripts/test and scripts/check: the one way they set up .venv.
#
#   ensure_installed ""       OwnSona itself (scripts/serve)
#   ensure_installed test     OwnSona with its test and check tools (scripts/test, scripts/check)
#
# pip runs only when it must: on the first run, when pyproject.toml changed, or when the
# tools asked for are not installed yet. What was installed is kept in .venv/.ownsona-installed
# (the hash of pyproject.toml, then the extras), so a later run needs no package index.
# Set VENV to use another virtualenv (default .venv).
ensure_installed() {
  local extras="$1"
  local venv="${VENV:-.venv}"
  local python="${PYTHON:-python3}"
  if [ ! -x "$venv/bin/python" ]; then
    "$python" -m venv "$venv" || return 1
  fi
  local stamp="$venv/.ownsona-installed"
  local wanted
  wanted="$("$venv/bin/python" -c 'import hashlib; print(hashlib.sha256(open("pyproject.toml","rb").read()).hexdigest())')"
  local have_hash="" have_extras=""
  if [ -f "$stamp" ]; then
    read -r have_hash have_extras < "$stamp" || true
  fi
  # The test extras include everything a plain install has.
  if [ "$have_hash" = "$wanted" ] && [ -x "$venv/bin/ownsona" ] \
    && { [ -z "$extras" ] || [ "$have_extras" = "$extras" ]; }; then
    return 0
  fi
  local target="."
  [ -n "$extras" ] && target=".[$extras]"
  "$venv/bin/python" -m pip install --quiet --disable-pip-version-check --upgrade pip || return 1
  "$venv/bin/python" -m pip install --quiet --disable-pip-version-check -e "$target" || return 1
  echo "$wanted $extras" > "$stamp"
}
