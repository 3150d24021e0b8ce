variable "base_dir" {
  description = "Absolute directory holding every node's data, logs and pid files (Odin passes <repo>/.local)."
  type        = string
  validation {
    condition     = startswith(var.base_dir, "/")
    error_message = "base_dir must be an absolute path."
  }
}

variable "bind_host" {
  description = "Address every local service binds to. Only loopback is allowed for the local environment."
  type        = string
  default     = "127.0.0.1"
  validation {
    condition     = can(regex("^127\\.", var.bind_host))
    error_message = "bind_host must be a loopback address (127.x.x.x) in the local environment."
  }
}

variable "spark_workers" {
  description = "Number of Spark standalone workers."
  type        = number
  default     = 2
  validation {
    condition     = var.spark_workers >= 1 && var.spark_workers <= 16 && floor(var.spark_workers) == var.spark_workers
    error_message = "spark_workers must be a whole number from 1 to 16."
  }
}

variable "spark_worker_cores" {
  description = "Cores each Spark worker offers."
  type        = number
  default     = 1
  validation {
    condition     = var.spark_worker_cores >= 1 && var.spark_worker_cores <= 64
    error_message = "spark_worker_cores must be from 1 to 64."
  }
}

variable "spark_worker_memory" {
  description = "Memory each Spark worker offers, in Spark's notation (e.g. 1g, 512m)."
  type        = string
  default     = "2g"
  validation {
    condition     = can(regex("^[0-9]+[mg]$", var.spark_worker_memory))
    error_message = "spark_worker_memory must look like 512m or 2g."
  }
}

variable "airflow_parallelism" {
  description = "Airflow core.parallelism: how many task instances run at once."
  type        = number
  default     = 4
  validation {
    condition     = var.airflow_parallelism >= 1 && var.airflow_parallelism <= 64
    error_message = "airflow_parallelism must be from 1 to 64."
  }
}

variable "airflow_users" {
  description = "Airflow's local users (simple auth manager) and their roles: viewer, user, op or admin."
  type        = map(string)
  default     = { admin = "admin" }
  validation {
    condition     = length(var.airflow_users) > 0 && alltrue([for r in values(var.airflow_users) : contains(["viewer", "user", "op", "admin"], r)])
    error_message = "airflow_users needs at least one user, and every role must be one of viewer, user, op, admin."
  }
}

variable "airflow_dags_paused" {
  description = "Whether Airflow pauses the DAGs it sees first. False: the platform's scheduled DAGs run from the start."
  type        = bool
  default     = false
}

variable "traffic_rate" {
  description = "Events per second the traffic node sends on each catalog data stream."
  type        = number
  default     = 5
  validation {
    condition     = var.traffic_rate > 0 && var.traffic_rate <= 10000
    error_message = "traffic_rate must be above 0 and at most 10000 events per second."
  }
}

variable "ports" {
  description = "Overrides of the default ports (see locals.default_ports for the names)."
  type        = map(number)
  default     = {}
  validation {
    condition = alltrue([for k in keys(var.ports) : contains([
      "kafka", "kafka_perf", "victoria_metrics", "influxdb", "influxdb_rpc", "spark_master", "spark_rest", "spark_master_ui",
      "spark_worker", "spark_worker_ui", "postgres", "airflow", "alertmanager", "alert_receiver", "vmalert", "traffic",
    ], k)])
    error_message = "ports keys must be among kafka, kafka_perf, victoria_metrics, influxdb, influxdb_rpc, spark_master, spark_rest, spark_master_ui, spark_worker, spark_worker_ui, postgres, airflow, alertmanager, alert_receiver, vmalert, traffic."
  }
  validation {
    condition     = alltrue([for p in values(var.ports) : p >= 1024 && p <= 65000])
    error_message = "every port must be between 1024 and 65000."
  }
}
