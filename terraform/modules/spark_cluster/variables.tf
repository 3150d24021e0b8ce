variable "cluster" {
  description = "The cluster's name in the registry, team/name."
  type        = string
  validation {
    condition     = can(regex("^[a-z][a-z0-9-]{0,62}/[a-z][a-z0-9-]{0,62}$", var.cluster))
    error_message = "cluster must be team/name, both lowercase slugs."
  }
}

variable "masters" {
  description = "Spark masters. 1: FILESYSTEM recovery (a restarted master recovers its workers and drivers); 2 or more: ZOOKEEPER recovery with a ZooKeeper node, a standby master takes over."
  type        = number
  validation {
    condition     = var.masters >= 1 && var.masters <= 5 && floor(var.masters) == var.masters
    error_message = "masters must be a whole number from 1 to 5."
  }
}

variable "workers" {
  description = "Spark workers."
  type        = number
  validation {
    condition     = var.workers >= 1 && var.workers <= 16 && floor(var.workers) == var.workers
    error_message = "workers must be a whole number from 1 to 16."
  }
}

variable "worker_cores" {
  description = "Cores each worker offers to drivers and executors."
  type        = number
  validation {
    condition     = var.worker_cores >= 1 && var.worker_cores <= 64
    error_message = "worker_cores must be from 1 to 64."
  }
}

variable "worker_memory" {
  description = "Memory each worker offers, in Spark's notation (512m, 2g)."
  type        = string
  validation {
    condition     = can(regex("^[0-9]+[mg]$", var.worker_memory))
    error_message = "worker_memory must look like 512m or 2g."
  }
}

variable "base_dir" {
  description = "Absolute directory under which each node keeps data, logs and pid files."
  type        = string
  validation {
    condition     = startswith(var.base_dir, "/")
    error_message = "base_dir must be an absolute path."
  }
}

variable "default_host" {
  description = "Address of nodes not in `hosts` (the local environment: every node on loopback)."
  type        = string
  default     = "127.0.0.1"
}

variable "hosts" {
  description = "Address of each node by name (cloud instances), e.g. { master-1 = \"10.0.0.2\" }."
  type        = map(string)
  default     = {}
}

variable "port_base" {
  description = "First of the 48 ports Odin allocated to this cluster when its nodes share a host (local); null: every node has a host of its own and Spark's usual ports."
  type        = number
  default     = null
  validation {
    condition     = var.port_base == null ? true : var.port_base >= 1024 && var.port_base + 48 <= 65535
    error_message = "port_base must leave 48 ports below 65536."
  }
}
