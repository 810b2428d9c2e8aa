// The typed service stubs generated from proto/ live in Generated/ (scripts/generate-protos.sh).
