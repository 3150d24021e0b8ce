# One team's Spark standalone cluster: its masters, workers and (for 2+ masters) the ZooKeeper node their
# recovery uses, as nodes Ansible converges (roles spark_master, spark_worker, zookeeper). Environment-free: a
# root module gives the hosts (loopback and a port block locally, instance addresses in a cloud).
locals {
  ha      = var.masters >= 2
  masters = [for i in range(1, var.masters + 1) : "master-${i}"]
  workers = [for i in range(1, var.workers + 1) : "worker-${i}"]
  keepers = local.ha ? ["zookeeper"] : []
  host    = { for n in concat(local.masters, local.workers, local.keepers) : n => lookup(var.hosts, n, var.default_host) }

  # A shared host: masters at base+3i.., ZooKeeper at base+15, workers at base+16+2i..; else Spark's own ports.
  shared = var.port_base != null
  master_ports = { for i, n in local.masters : n => (local.shared ?
    { master = var.port_base + 3 * i, rest = var.port_base + 3 * i + 1, ui = var.port_base + 3 * i + 2 } :
  { master = 7077, rest = 6066, ui = 8080 }) }
  worker_ports = { for i, n in local.workers : n => (local.shared ?
    { worker = var.port_base + 16 + 2 * i, ui = var.port_base + 17 + 2 * i } :
  { worker = 7078, ui = 8081 }) }
  zookeeper_port = local.shared ? var.port_base + 15 : 2181

  master_url    = "spark://${join(",", [for n in local.masters : "${local.host[n]}:${local.master_ports[n].master}"])}"
  zookeeper_url = local.ha ? "${local.host["zookeeper"]}:${local.zookeeper_port}" : ""
}

module "master" {
  source   = "../service_node"
  for_each = toset(local.masters)

  name     = each.key
  role     = "spark_master"
  host     = local.host[each.key]
  ports    = local.master_ports[each.key]
  base_dir = var.base_dir
  settings = {
    cluster       = var.cluster
    recovery_mode = local.ha ? "ZOOKEEPER" : "FILESYSTEM"
    zookeeper_url = local.zookeeper_url
    zookeeper_dir = "/daggers/${var.cluster}"
  }
}

module "zookeeper" {
  source   = "../service_node"
  for_each = toset(local.keepers)

  name     = each.key
  role     = "zookeeper"
  host     = local.host[each.key]
  ports    = { client = local.zookeeper_port }
  base_dir = var.base_dir
  settings = { cluster = var.cluster }
}

module "worker" {
  source   = "../service_node"
  for_each = toset(local.workers)

  name     = each.key
  role     = "spark_worker"
  host     = local.host[each.key]
  ports    = local.worker_ports[each.key]
  base_dir = var.base_dir
  settings = {
    cluster    = var.cluster
    master_url = local.master_url
    cores      = tostring(var.worker_cores)
    memory     = var.worker_memory
  }
}
