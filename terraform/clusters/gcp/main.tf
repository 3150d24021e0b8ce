# A team's Spark cluster on GCP, as the seeds' `module "p_de_daggers_flink_playground"`: a network of its own,
# one instance per node, and the same spark_cluster module the local environment uses, given the instances'
# addresses. Ansible then installs Java, Spark and the platform's Python runtime on every instance.
locals {
  team   = split("/", var.cluster)[0]
  name   = split("/", var.cluster)[1]
  prefix = "daggers-${local.team}-${local.name}"
  nodes = concat(
    [for i in range(1, var.masters + 1) : "master-${i}"],
    var.masters >= 2 ? ["zookeeper"] : [],
    [for i in range(1, var.workers + 1) : "worker-${i}"],
  )
}

resource "google_compute_network" "cluster" {
  name                    = local.prefix
  auto_create_subnetworks = false
}

resource "google_compute_subnetwork" "cluster" {
  name          = local.prefix
  network       = google_compute_network.cluster.id
  ip_cidr_range = var.subnet_cidr
}

resource "google_compute_firewall" "internal" {
  name          = "${local.prefix}-internal"
  network       = google_compute_network.cluster.id
  source_ranges = [var.subnet_cidr]
  allow {
    protocol = "tcp"
  }
}

resource "google_compute_firewall" "admin" {
  name          = "${local.prefix}-admin"
  network       = google_compute_network.cluster.id
  source_ranges = [var.admin_cidr]
  allow {
    protocol = "tcp"
    ports    = ["22", "6066", "8080"] # Ansible, REST submission (JWS-protected), master UI
  }
}

resource "google_compute_instance" "node" {
  for_each     = toset(local.nodes)
  name         = "${local.prefix}-${each.key}"
  machine_type = var.machine_type
  labels = {
    team    = local.team
    cluster = local.name
    role    = startswith(each.key, "master") ? "spark-master" : each.key == "zookeeper" ? "zookeeper" : "spark-worker"
  }
  boot_disk {
    initialize_params {
      image = var.image
      size  = 50
    }
  }
  network_interface {
    subnetwork = google_compute_subnetwork.cluster.id
    access_config {} # a public address for Ansible; restrict with admin_cidr
  }
  metadata = {
    ssh-keys = "${var.ssh_user}:${var.ssh_public_key}"
  }
}

module "cluster" {
  source = "../../modules/spark_cluster"

  cluster       = var.cluster
  masters       = var.masters
  workers       = var.workers
  worker_cores  = var.worker_cores
  worker_memory = var.worker_memory
  base_dir      = var.base_dir
  hosts         = { for n, vm in google_compute_instance.node : n => vm.network_interface[0].network_ip }
}
