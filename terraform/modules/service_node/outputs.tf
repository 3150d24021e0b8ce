output "node" {
  description = "The node as Odin and Ansible consume it: name, role, host, ports, dirs, settings."
  value       = terraform_data.node.input
}
