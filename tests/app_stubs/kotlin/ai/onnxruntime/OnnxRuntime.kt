// STUB for compiling pocketbert's generated Kotlin on Linux only; never shipped, never run. ONNX Runtime's Java API
// (package ai.onnxruntime, com.microsoft.onnxruntime:onnxruntime-android), with only what the templates call, as its
// API documentation declares it: https://onnxruntime.ai/docs/api/java/ai/onnxruntime/package-summary.html
package ai.onnxruntime

import java.nio.LongBuffer
import java.util.Optional

// https://onnxruntime.ai/docs/api/java/ai/onnxruntime/OrtEnvironment.html
class OrtEnvironment private constructor() : AutoCloseable {
    companion object {
        // https://onnxruntime.ai/docs/api/java/ai/onnxruntime/OrtEnvironment.html#getEnvironment()
        @JvmStatic fun getEnvironment(): OrtEnvironment = throw UnsupportedOperationException("stub")
    }

    // https://onnxruntime.ai/docs/api/java/ai/onnxruntime/OrtEnvironment.html#createSession(byte%5B%5D,ai.onnxruntime.OrtSession.SessionOptions)
    fun createSession(modelArray: ByteArray, options: OrtSession.SessionOptions): OrtSession =
        throw UnsupportedOperationException("stub")

    override fun close() {}
}

// https://onnxruntime.ai/docs/api/java/ai/onnxruntime/OnnxValue.html
interface OnnxValue : AutoCloseable {
    // https://onnxruntime.ai/docs/api/java/ai/onnxruntime/OnnxValue.html#getValue()
    val value: Any
}

// https://onnxruntime.ai/docs/api/java/ai/onnxruntime/OnnxTensor.html
class OnnxTensor private constructor() : OnnxValue {
    companion object {
        // https://onnxruntime.ai/docs/api/java/ai/onnxruntime/OnnxTensor.html#createTensor(ai.onnxruntime.OrtEnvironment,java.lang.String%5B%5D,long%5B%5D)
        @JvmStatic fun createTensor(env: OrtEnvironment, data: Array<String>, shape: LongArray): OnnxTensor =
            throw UnsupportedOperationException("stub")

        // https://onnxruntime.ai/docs/api/java/ai/onnxruntime/OnnxTensor.html#createTensor(ai.onnxruntime.OrtEnvironment,java.nio.LongBuffer,long%5B%5D)
        @JvmStatic fun createTensor(env: OrtEnvironment, data: LongBuffer, shape: LongArray): OnnxTensor =
            throw UnsupportedOperationException("stub")
    }

    override val value: Any get() = throw UnsupportedOperationException("stub")
    override fun close() {}
}

// https://onnxruntime.ai/docs/api/java/ai/onnxruntime/OrtSession.html
class OrtSession private constructor() : AutoCloseable {
    // https://onnxruntime.ai/docs/api/java/ai/onnxruntime/OrtSession.html#run(java.util.Map)
    fun run(inputs: Map<String, OnnxTensor>): Result = throw UnsupportedOperationException("stub")

    override fun close() {}

    // https://onnxruntime.ai/docs/api/java/ai/onnxruntime/OrtSession.SessionOptions.html
    class SessionOptions : AutoCloseable {
        // https://onnxruntime.ai/docs/api/java/ai/onnxruntime/OrtSession.SessionOptions.html#registerCustomOpLibrary(java.lang.String)
        fun registerCustomOpLibrary(path: String) {}
        // https://onnxruntime.ai/docs/api/java/ai/onnxruntime/OrtSession.SessionOptions.html#addNnapi()
        fun addNnapi() {}
        // https://onnxruntime.ai/docs/api/java/ai/onnxruntime/OrtSession.SessionOptions.html#addXnnpack(java.util.Map)
        fun addXnnpack(providerOptions: Map<String, String>) {}
        // https://onnxruntime.ai/docs/api/java/ai/onnxruntime/OrtSession.SessionOptions.html#setIntraOpNumThreads(int)
        fun setIntraOpNumThreads(numThreads: Int) {}

        override fun close() {}
    }

    // https://onnxruntime.ai/docs/api/java/ai/onnxruntime/OrtSession.Result.html
    class Result private constructor() : AutoCloseable, Iterable<Map.Entry<String, OnnxValue>> {
        // https://onnxruntime.ai/docs/api/java/ai/onnxruntime/OrtSession.Result.html#get(int)
        operator fun get(index: Int): OnnxValue = throw UnsupportedOperationException("stub")
        // https://onnxruntime.ai/docs/api/java/ai/onnxruntime/OrtSession.Result.html#get(java.lang.String)
        operator fun get(key: String): Optional<OnnxValue> = throw UnsupportedOperationException("stub")

        override fun iterator(): Iterator<Map.Entry<String, OnnxValue>> = throw UnsupportedOperationException("stub")
        override fun close() {}
    }
}
