#!/bin/sh
# A chart cannot read files outside itself: keep files/policy.yaml a byte copy of policies/default.yaml.
# tests/charts/test_chart.py fails when they differ.
set -eu
here=$(cd "$(dirname "$0")" && pwd)
cp "$here/../../policies/default.yaml" "$here/files/policy.yaml"
