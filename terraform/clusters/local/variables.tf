# What Odin passes (odin/cluster/lifecycle.py, as odin.tfvars.json), handed on as they are to
# modules/spark_cluster: its variables.tf types, describes and validates each (inputs in its README.md).
variable "cluster" {}
variable "masters" {}
variable "workers" {}
variable "worker_cores" {}
variable "worker_memory" {}
variable "base_dir" {}

# Required here: the cluster's processes share loopback, so they need the block of 48 ports Odin allocated.
variable "port_base" {
  nullable = false
}

variable "bind_host" {
  description = "Loopback address the cluster's processes bind to."
  type        = string
  default     = "127.0.0.1"
  validation {
    condition     = can(regex("^127\\.", var.bind_host))
    error_message = "bind_host must be a loopback address in the local environment."
  }
}
