variable "name" {
  description = "Node name, unique in the environment (becomes the Ansible inventory hostname)."
  type        = string
  validation {
    condition     = can(regex("^[a-z][a-z0-9-]{1,40}$", var.name))
    error_message = "name must be lowercase letters, digits and dashes, 2-41 characters, starting with a letter."
  }
}

variable "role" {
  description = "Ansible role (and inventory group) that configures this node."
  type        = string
  validation {
    condition = contains([
      "kafka_broker", "victoria_metrics", "influxdb", "spark_master", "spark_worker", "postgres", "airflow", "zookeeper",
      "alertmanager", "vmalert", "traffic",
    ], var.role)
    error_message = "role must be one of kafka_broker, victoria_metrics, influxdb, spark_master, spark_worker, postgres, airflow, zookeeper, alertmanager, vmalert, traffic."
  }
}

variable "host" {
  description = "Address the node's services bind to and are reached on."
  type        = string
}

variable "ports" {
  description = "Named TCP ports the node listens on."
  type        = map(number)
  validation {
    condition     = alltrue([for p in values(var.ports) : p >= 1024 && p <= 65535])
    error_message = "every port must be between 1024 and 65535."
  }
}

variable "base_dir" {
  description = "Directory under which the node keeps its data, logs and pid files."
  type        = string
}

variable "settings" {
  description = "Role-specific settings passed through to Ansible (strings only)."
  type        = map(string)
  default     = {}
}
