# A team's Spark cluster in the local environment: processes on loopback, in a block of ports Odin allocated
# and recorded in the registry. One state per cluster (Odin keeps it under <state>/terraform/clusters/team/name).
module "cluster" {
  source = "../../modules/spark_cluster"

  cluster       = var.cluster
  masters       = var.masters
  workers       = var.workers
  worker_cores  = var.worker_cores
  worker_memory = var.worker_memory
  base_dir      = var.base_dir
  default_host  = var.bind_host
  port_base     = var.port_base
}
