package org.clusterforge.analysis.smartcn;

import org.apache.lucene.analysis.Tokenizer;
import org.apache.lucene.analysis.cn.smart.HMMChineseTokenizer;
import org.opensearch.common.settings.Settings;
import org.opensearch.env.Environment;
import org.opensearch.index.IndexSettings;
import org.opensearch.index.analysis.AbstractTokenizerFactory;

/** Splits text into sentences and segments each into words with Lucene's hidden Markov model. */
public final class SmartcnTokenizerFactory extends AbstractTokenizerFactory {

    public SmartcnTokenizerFactory(
            IndexSettings indexSettings, Environment environment, String name, Settings settings) {
        super(indexSettings, settings, name);
    }

    @Override
    public Tokenizer create() {
        return new HMMChineseTokenizer();
    }
}
