# Sourced by the run and test scripts: installs the Debian packages the project needs when
# any is missing. Swift itself is not a Debian package: it must be on PATH already.

auth_required_packages=(
    pkg-config
    libprotobuf-c-dev
    protobuf-c-compiler
    libpq-dev
    libssl-dev
    openssl
    postgresql
    pgbouncer
    python3
    python3-venv
)

ensure_system_packages() {
    ensure_packages "${auth_required_packages[@]}"
    if ! command -v swift >/dev/null 2>&1; then
        echo "swift is not on PATH: install Swift 6 (https://www.swift.org/install/linux/) first." >&2
        exit 1
    fi
}

# Installs the Debian packages named that are missing (e.g. stress-ng, for the stress runs only).
ensure_packages() {
    local missing=()
    local package
    for package in "$@"; do
        if ! dpkg-query -W -f='${Status}' "$package" 2>/dev/null | grep -q "install ok installed"; then
            missing+=("$package")
        fi
    done
    if ((${#missing[@]} > 0)); then
        echo "Installing missing Debian packages: ${missing[*]}" >&2
        local sudo=""
        if [[ $(id -u) -ne 0 ]]; then sudo="sudo"; fi
        $sudo apt-get update -qq
        DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -qq "${missing[@]}" >/dev/null
    fi
}
