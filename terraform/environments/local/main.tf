# The local environment: every service of the platform as processes on one machine. It composes the same
# service_node module a multi-host environment would, so Odin and Ansible treat both alike.
locals {
  default_ports = {
    kafka            = 9092
    kafka_perf       = 9096 # the perf cluster's broker: Loki's load and broker faults never reach data streams
    victoria_metrics = 8428
    influxdb         = 8086
    influxdb_rpc     = 8089
    spark_master     = 7077
    spark_rest       = 6066
    spark_master_ui  = 8090 # not 8080: that is Airflow's
    spark_worker     = 7100 # worker i listens on spark_worker + i
    spark_worker_ui  = 8100 # and serves its UI on spark_worker_ui + i
    postgres         = 5432
    airflow          = 8080
    alertmanager     = 9093
    alert_receiver   = 9095 # the platform's webhook receiver, beside Alertmanager
    vmalert          = 8880
    traffic          = 9097 # the traffic node's health page
  }
  ports = merge(local.default_ports, var.ports)

  singletons = {
    kafka-broker = {
      role  = "kafka_broker"
      ports = { kafka = local.ports.kafka }
    }
    kafka-perf = {
      role  = "kafka_broker"
      ports = { kafka = local.ports.kafka_perf }
    }
    victoria-metrics = {
      role  = "victoria_metrics"
      ports = { http = local.ports.victoria_metrics }
    }
    influxdb-server = {
      role  = "influxdb"
      ports = { http = local.ports.influxdb, rpc = local.ports.influxdb_rpc }
    }
    spark-master = {
      role  = "spark_master"
      ports = { master = local.ports.spark_master, rest = local.ports.spark_rest, ui = local.ports.spark_master_ui }
    }
    postgres-server = {
      role  = "postgres"
      ports = { postgres = local.ports.postgres }
    }
    airflow-server = {
      role  = "airflow"
      ports = { http = local.ports.airflow }
    }
    alertmanager = {
      role  = "alertmanager"
      ports = { http = local.ports.alertmanager, receiver = local.ports.alert_receiver }
    }
    vmalert = {
      role  = "vmalert"
      ports = { http = local.ports.vmalert }
    }
    traffic = {
      role  = "traffic"
      ports = { http = local.ports.traffic }
    }
  }

  # Platform services reach PostgreSQL as their own roles, with libpq password files the postgres role writes
  # (0600): URLs name the file, never a password. Names as in odin/endpoints.py.
  pg_secrets = "${var.base_dir}/data/postgres-server/secrets"
  pg_address = "${var.bind_host}:${local.ports.postgres}"

  settings = {
    spark-master = {}
    alertmanager = {
      registry_url = "postgresql+psycopg://odin_registry@${local.pg_address}/registry?passfile=${local.pg_secrets}/odin_registry.pgpass"
    }
    vmalert = {
      datasource_url   = "http://${var.bind_host}:${local.ports.victoria_metrics}"
      alertmanager_url = "http://${var.bind_host}:${local.ports.alertmanager}"
    }
    airflow-server = {
      parallelism = tostring(var.airflow_parallelism)
      # Airflow's metadata in its own database on the platform's PostgreSQL, as in production
      metadata_db = "postgresql+psycopg://odin_airflow@${local.pg_address}/airflow?passfile=${local.pg_secrets}/odin_airflow.pgpass"
      users       = join(",", [for u in sort(keys(var.airflow_users)) : "${u}:${var.airflow_users[u]}"])
      dags_paused = tostring(var.airflow_dags_paused)
    }
    traffic = {
      kafka = "${var.bind_host}:${local.ports.kafka}"
      rate  = tostring(var.traffic_rate)
    }
  }
}

module "service" {
  source   = "../../modules/service_node"
  for_each = local.singletons

  name     = each.key
  role     = each.value.role
  host     = var.bind_host
  ports    = each.value.ports
  base_dir = var.base_dir
  settings = lookup(local.settings, each.key, {})
}

module "spark_worker" {
  source   = "../../modules/service_node"
  for_each = toset([for i in range(1, var.spark_workers + 1) : tostring(i)])

  name     = "spark-worker-${each.key}"
  role     = "spark_worker"
  host     = var.bind_host
  ports    = { worker = local.ports.spark_worker + tonumber(each.key), ui = local.ports.spark_worker_ui + tonumber(each.key) }
  base_dir = var.base_dir
  settings = {
    master_url = "spark://${var.bind_host}:${local.ports.spark_master}"
    cores      = tostring(var.spark_worker_cores)
    memory     = var.spark_worker_memory
  }
}
