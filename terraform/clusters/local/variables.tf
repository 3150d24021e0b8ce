variable "cluster" {
  description = "team/name of the cluster."
  type        = string
}

variable "masters" {
  description = "Spark masters (2 or more: ZooKeeper recovery)."
  type        = number
}

variable "workers" {
  description = "Spark workers."
  type        = number
}

variable "worker_cores" {
  description = "Cores per worker."
  type        = number
}

variable "worker_memory" {
  description = "Memory per worker (512m, 2g)."
  type        = string
}

variable "base_dir" {
  description = "Absolute directory for the cluster's data, logs and pid files."
  type        = string
  validation {
    condition     = startswith(var.base_dir, "/")
    error_message = "base_dir must be an absolute path."
  }
}

variable "port_base" {
  description = "First port of the cluster's block of 48."
  type        = number
  validation {
    condition     = var.port_base >= 1024 && var.port_base + 48 <= 65535
    error_message = "port_base must leave 48 ports below 65536."
  }
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
