/*
 * The project's local Iceberg REST catalog: Apache Iceberg's reference REST adapter and servlet (iceberg-core's
 * test artifact, the same pieces as org.apache.iceberg.rest.RESTCatalogServer) served by Jetty on ONE address.
 * The reference server binds every interface and names its backend catalog "rest_backend"; this launcher binds the
 * host it is given (127.0.0.1 by default) and names the backend catalog like the tables' catalog, so an existing
 * JDBC catalog file keeps its tables.
 *
 * Usage: java -cp <catalog-server jars>:<this> LocalRestCatalogServer <host> <port> <catalog-name> <properties-file>
 * The properties file holds the backend catalog's properties (uri, warehouse, jdbc.*): it may carry credentials and
 * is written with mode 600.
 */

import java.io.Reader;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.HashMap;
import java.util.Map;
import java.util.Properties;
import org.apache.hadoop.conf.Configuration;
import org.apache.iceberg.CatalogUtil;
import org.apache.iceberg.catalog.Catalog;
import org.apache.iceberg.rest.RESTCatalogAdapter;
import org.apache.iceberg.rest.RESTCatalogServlet;
import org.eclipse.jetty.server.Server;
import org.eclipse.jetty.server.ServerConnector;
import org.eclipse.jetty.server.handler.gzip.GzipHandler;
import org.eclipse.jetty.servlet.ServletContextHandler;
import org.eclipse.jetty.servlet.ServletHolder;

public final class LocalRestCatalogServer {
  private LocalRestCatalogServer() {}

  public static void main(String[] args) throws Exception {
    if (args.length != 4) {
      System.err.println("usage: LocalRestCatalogServer <host> <port> <catalog-name> <properties-file>");
      System.exit(2);
    }
    String host = args[0];
    int port = Integer.parseInt(args[1]);
    String catalogName = args[2];

    Properties file = new Properties();
    try (Reader reader = Files.newBufferedReader(Path.of(args[3]))) {
      file.load(reader);
    }
    Map<String, String> properties = new HashMap<>();
    for (String key : file.stringPropertyNames()) {
      properties.put(key, file.getProperty(key));
    }
    properties.putIfAbsent("catalog-impl", "org.apache.iceberg.jdbc.JdbcCatalog");

    Catalog catalog = CatalogUtil.buildIcebergCatalog(catalogName, properties, new Configuration());
    ServletContextHandler context = new ServletContextHandler(ServletContextHandler.NO_SESSIONS);
    context.addServlet(new ServletHolder(new RESTCatalogServlet(new RESTCatalogAdapter(catalog))), "/*");
    context.insertHandler(new GzipHandler());

    Server server = new Server();
    ServerConnector connector = new ServerConnector(server);
    connector.setHost(host);
    connector.setPort(port);
    server.addConnector(connector);
    server.setHandler(context);
    server.setStopAtShutdown(true);
    server.start();
    System.out.println("LocalRestCatalogServer: catalog " + catalogName + " listening on http://" + host + ":"
        + connector.getLocalPort());
    System.out.flush();
    server.join();
  }
}
