variable "cluster" {
  description = "team/name of the cluster."
  type        = string
}

variable "project" {
  description = "GCP project the cluster's instances and network live in."
  type        = string
}

variable "region" {
  description = "GCP region."
  type        = string
  default     = "asia-southeast2"
}

variable "zone" {
  description = "GCP zone of the instances."
  type        = string
  default     = "asia-southeast2-a"
}

variable "machine_type" {
  description = "Machine type of every node."
  type        = string
  default     = "e2-standard-4"
}

variable "image" {
  description = "Boot image: Debian 12, what the platform's roles install on."
  type        = string
  default     = "debian-cloud/debian-12"
}

variable "subnet_cidr" {
  description = "The cluster's subnetwork."
  type        = string
  default     = "10.20.0.0/24"
}

variable "admin_cidr" {
  description = "Where Odin (Ansible over SSH) connects from."
  type        = string
}

variable "ssh_user" {
  description = "User Ansible logs in as."
  type        = string
  default     = "odin"
}

variable "ssh_public_key" {
  description = "Public key installed for ssh_user."
  type        = string
}

variable "masters" {
  description = "Spark masters (2 or more: ZooKeeper recovery, as the seeds' master_nodes = 3)."
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

# Accepted so that every environment takes the same variables; instances have a host each, so no port block.
variable "base_dir" {
  description = "Directory on each instance for data, logs and pid files."
  type        = string
  default     = "/var/lib/daggers"
}

variable "port_base" {
  description = "Unused here: every node has its own host and Spark's usual ports."
  type        = number
  default     = null
}
