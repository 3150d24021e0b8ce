# One host of an environment. On a laptop it is a set of processes on 127.0.0.1; in a cloud module the same
# shape is produced from a VM resource. Ansible only ever sees the output of this module.
locals {
  node = {
    name     = var.name
    role     = var.role
    host     = var.host
    ports    = var.ports
    settings = var.settings
    dirs = {
      data = "${var.base_dir}/data/${var.name}"
      log  = "${var.base_dir}/log"
      run  = "${var.base_dir}/run"
    }
  }
}

resource "terraform_data" "node" {
  input = local.node
}
