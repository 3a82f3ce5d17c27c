# shellcheck shell=bash
# Sourced by the project's scripts, never run on its own: where the state lives, which docker CLI
# to use, and the image cache the image builds share.
# shellcheck disable=SC2034 # read by the scripts that source this file
STATE=${WORKFLOW_AGENT_STATE:-/var/tmp/workflow-agent-dev}
DOCKER=${DOCKER:-$(command -v /usr/bin/docker || command -v docker || echo docker)}

# Each image the project builds carries the hash of its inputs in this label; an image whose label
# matches the hash of today's inputs is reused instead of rebuilt.
HASH_LABEL=workflow-agent.hash
image_hash() { # image -> the input hash it was built from; empty when there is no such image
  $DOCKER image inspect -f "{{ index .Config.Labels \"$HASH_LABEL\" }}" "$1" 2>/dev/null || true
}
image_id() { # image -> its id; empty when there is no such image
  $DOCKER image inspect -f '{{.Id}}' "$1" 2>/dev/null || true
}
drop_replaced() { # old image id (may be empty): remove it once a rebuild left it untagged
  if [ -n "$1" ] && [ "$($DOCKER image inspect -f '{{len .RepoTags}}' "$1" 2>/dev/null)" = 0 ]; then
    $DOCKER rmi "$1" >/dev/null 2>&1 || true  # a container may still use it
  fi
}
