terraform {
  required_version = ">= 1.4"
  # State lives under the gitignored .local/; Odin passes the path with -backend-config at init.
  backend "local" {}
}
