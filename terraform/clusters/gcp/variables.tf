# What Odin passes for every cluster (odin/cluster/lifecycle.py, as odin.tfvars.json), handed on as they are to
# modules/spark_cluster: its variables.tf types, describes and validates each (inputs in its README.md).
variable "cluster" {}
variable "masters" {}
variable "workers" {}
variable "worker_cores" {}
variable "worker_memory" {}

# Each instance is a host of its own: the nodes' directory is the same path on each, and there is no port block
# (port_base is accepted, as every environment takes the same variables, and unused: Spark's usual ports).
variable "base_dir" {
  default = "/var/lib/daggers"
}
variable "port_base" {
  default = null
}

# The GCP settings of the cluster's spec (ClusterSpec.gcp), and this environment's own.
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
