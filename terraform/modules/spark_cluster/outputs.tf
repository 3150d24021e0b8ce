output "nodes" {
  description = "Every node keyed by name (role, host, ports, dirs, settings): Odin's Ansible inventory."
  value = merge(
    { for k, m in module.master : k => m.node },
    { for k, m in module.zookeeper : k => m.node },
    { for k, m in module.worker : k => m.node },
  )
}

output "addresses" {
  description = "Where clients reach the cluster: the master URL (all masters), REST submission and UI URLs."
  value = {
    master_url = local.master_url
    rest_urls  = [for n in local.masters : "http://${local.host[n]}:${local.master_ports[n].rest}"]
    ui_urls    = [for n in local.masters : "http://${local.host[n]}:${local.master_ports[n].ui}"]
    recovery   = local.ha ? "ZOOKEEPER" : "FILESYSTEM"
  }
}
