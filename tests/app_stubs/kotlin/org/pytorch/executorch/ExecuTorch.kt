// STUB for compiling pocketbert's generated Kotlin on Linux only; never shipped, never run. ExecuTorch's Android
// Java API (org.pytorch:executorch-android), with only what the templates call, as its Javadoc declares it:
// https://docs.pytorch.org/executorch/stable/javadoc/org/pytorch/executorch/package-summary.html
package org.pytorch.executorch

// https://docs.pytorch.org/executorch/stable/javadoc/org/pytorch/executorch/Tensor.html
abstract class Tensor {
    companion object {
        // https://docs.pytorch.org/executorch/stable/javadoc/org/pytorch/executorch/Tensor.html#fromBlob(long[],long[])
        @JvmStatic fun fromBlob(data: LongArray, shape: LongArray): Tensor = throw UnsupportedOperationException("stub")
    }

    // https://docs.pytorch.org/executorch/stable/javadoc/org/pytorch/executorch/Tensor.html#getDataAsFloatArray()
    abstract val dataAsFloatArray: FloatArray
}

// https://docs.pytorch.org/executorch/stable/javadoc/org/pytorch/executorch/EValue.html
class EValue private constructor() {
    companion object {
        // https://docs.pytorch.org/executorch/stable/javadoc/org/pytorch/executorch/EValue.html#from(org.pytorch.executorch.Tensor)
        @JvmStatic fun from(tensor: Tensor): EValue = throw UnsupportedOperationException("stub")
    }

    // https://docs.pytorch.org/executorch/stable/javadoc/org/pytorch/executorch/EValue.html#toTensor()
    fun toTensor(): Tensor = throw UnsupportedOperationException("stub")
}

// https://docs.pytorch.org/executorch/stable/javadoc/org/pytorch/executorch/Module.html
class Module private constructor() {
    companion object {
        // https://docs.pytorch.org/executorch/stable/javadoc/org/pytorch/executorch/Module.html#load(java.lang.String)
        @JvmStatic fun load(modelPath: String): Module = throw UnsupportedOperationException("stub")
    }

    // https://docs.pytorch.org/executorch/stable/javadoc/org/pytorch/executorch/Module.html#forward(org.pytorch.executorch.EValue...)
    fun forward(vararg inputs: EValue): Array<EValue> = throw UnsupportedOperationException("stub")
}
