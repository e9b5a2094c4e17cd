// A Spark listener that holds the listener queue it shares with the OpenLineage listener for 4 s at the start of
// every SQL execution: a stand-in for a busy listener thread (a cold start, a two-core machine, a slow transport).
// Registered before the OpenLineage listener in spark.extraListeners, it runs first for each event, so OpenLineage
// handles each execution's start that much later (tests/integration/test_listener_lag.py).

import org.apache.spark.scheduler.SparkListener;
import org.apache.spark.scheduler.SparkListenerEvent;
import org.apache.spark.sql.execution.ui.SparkListenerSQLExecutionStart;

public class LaggingListener extends SparkListener {
  private static final long LAG_MILLIS = 4_000L;

  @Override
  public void onOtherEvent(SparkListenerEvent event) {
    if (event instanceof SparkListenerSQLExecutionStart) {
      try {
        Thread.sleep(LAG_MILLIS);
      } catch (InterruptedException interrupted) {
        Thread.currentThread().interrupt();
      }
    }
  }
}
