"""The paper's evaluation harness, a user of the profiler that the profiler never imports.

generator/ (paced emitters over ZeroMQ), spark_source (the generator as a Spark streaming source), pipelines
(YSB and the Karimov queries on Spark), trial and maxtput (the maximum sustainable throughput search), bench/
(the `cloudprofiler bench` targets).
"""
