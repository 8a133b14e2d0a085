#!/usr/bin/env bash
# Checks commit messages against the project's convention (docs/development.md, Commits):
#   type(scope): subject     at most 72 characters, a conventional type, no trailing period
#   <blank line>
#   body                     why, and the figures
# Usage: commit-message.sh FILE            check one message (the commit-msg hook)
#        commit-message.sh --range REV...  check every commit `git rev-list REV...` names (CI)
set -euo pipefail

TYPES="feat|fix|refactor|perf|test|docs|build|ci|chore|revert|style"
MAX=72

# Prints the problems of one message (read from stdin), nothing when it is fine.
problems() {
  local msg subject
  msg=$(grep -v '^#' || true)
  subject=$(printf '%s\n' "$msg" | head -1)
  if ! printf '%s' "$subject" | grep -qE "^($TYPES)(\([a-z0-9./-]+\))?!?: [^ ].*$"; then
    echo "subject must read 'type(scope): what changed' with type one of ${TYPES//|/, }: $subject"
  fi
  if [ "${#subject}" -gt "$MAX" ]; then
    echo "subject is ${#subject} characters; at most $MAX (figures and reasons go in the body)"
  fi
  case "$subject" in *.) echo "subject ends with a period" ;; esac
  if [ "$(printf '%s\n' "$msg" | sed -n 2p)" != "" ]; then
    echo "the second line must be blank (subject, blank line, body)"
  fi
  if [ -z "$(printf '%s\n' "$msg" | sed -n '3,$p' | tr -d '[:space:]')" ]; then
    echo "a body is needed: say why, and give the figures"
  fi
}

if [ "${1:-}" = "--range" ]; then
  bad=0
  for c in $(git rev-list --no-merges "${@:2}"); do
    p=$(git log -1 --format=%B "$c" | problems)
    if [ -n "$p" ]; then
      echo "commit $(git log -1 --format='%h %s' "$c" | cut -c1-100):" >&2
      printf '  %s\n' "$p" >&2
      bad=1
    fi
  done
  exit "$bad"
fi

p=$(problems <"$1")
if [ -n "$p" ]; then
  echo "commit message refused:" >&2
  printf '  %s\n' "$p" >&2
  echo "  (see docs/development.md, Commits)" >&2
  exit 1
fi
