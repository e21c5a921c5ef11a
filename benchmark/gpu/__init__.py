"""GPU checks (benchmark/gpu/check.sh and the scripts it runs)."""
